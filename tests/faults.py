"""Fault injection at the botocore level, on real moto calls.

The faults sit where AWS's would: in the request/response path of a boto3
client, not in jobkit's code. A fault short-circuits the call before it
reaches moto, so botocore's own retries never see it: each injected fault is
one call that failed *after* the SDK's retries, as jobkit's code sees it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

#: Error shapes AWS returns for throttling and server faults: (code, HTTP status).
SQS_THROTTLE = ("RequestThrottled", 400)
SQS_SERVER_ERROR = ("InternalError", 500)
SQS_UNAVAILABLE = ("ServiceUnavailable", 503)
DYNAMODB_THROTTLE = ("ThrottlingException", 400)
DYNAMODB_CAPACITY = ("ProvisionedThroughputExceededException", 400)
DYNAMODB_SERVER_ERROR = ("InternalServerError", 500)


class _FakeHttpResponse:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = {}
        self.content = b""


def _error(code: str, status: int, message: str = "injected fault") -> tuple[_FakeHttpResponse, dict[str, Any]]:
    return _FakeHttpResponse(status), {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }


class FailBatchEntries:
    """Makes SendMessageBatch fail some entries: they are taken out of the real
    request (so they really are not sent) and reported under ``Failed``.

    Args:
        match: which entries to fail (gets the request entry).
        times: how many calls to interfere with (then it passes everything).
        only_matching: count only the calls that have an entry to fail.
    """

    def __init__(
        self,
        client: Any,
        match: Callable[[dict[str, Any]], bool],
        *,
        code: str = "InternalError",
        sender_fault: bool = False,
        times: int = 1_000_000,
        only_matching: bool = False,
    ) -> None:
        self._match, self._code, self._sender_fault, self.remaining = match, code, sender_fault, times
        self._only_matching = only_matching
        self.failed_entries = 0
        self._events = client.meta.events
        self._handlers: list[tuple[str, Callable[..., Any]]] = [
            ("provide-client-params.sqs.SendMessageBatch", self._take_out),
            ("before-call.sqs.SendMessageBatch", self._short_circuit_if_empty),
            ("after-call.sqs.SendMessageBatch", self._report),
        ]
        for event, handler in self._handlers:
            self._events.register(event, handler)

    def remove(self) -> None:
        """Stop injecting: unregister from the client."""
        for event, handler in self._handlers:
            self._events.unregister(event, handler)

    def _take_out(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if self.remaining <= 0 or (self._only_matching and not any(map(self._match, params["Entries"]))):
            return
        self.remaining -= 1
        removed = [e for e in params["Entries"] if self._match(e)]
        kept = [e for e in params["Entries"] if not self._match(e)]
        if kept:
            params["Entries"] = kept
        else:  # an empty batch is invalid: fail the whole call before it is sent
            context["faults.all"] = True
        context["faults.removed"] = removed
        self.failed_entries += len(removed)

    def _failures(self, context: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"Id": e["Id"], "SenderFault": self._sender_fault, "Code": self._code, "Message": "injected fault"}
            for e in context.get("faults.removed", [])
        ]

    def _short_circuit_if_empty(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> Any:
        if context.get("faults.all"):
            return _FakeHttpResponse(200), {"Successful": [], "Failed": self._failures(context)}
        return None

    def _report(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if context.get("faults.removed") and not context.get("faults.all"):
            parsed.setdefault("Failed", []).extend(self._failures(context))


class FailCalls:
    """Makes an operation fail with an AWS error before it reaches moto.

    Args:
        operation: e.g. ``"sqs.SendMessageBatch"``, ``"dynamodb.PutItem"`` or ``"dynamodb.*"``.
        times: how many calls fail at most; then calls pass. Set :attr:`remaining`
            again to start another outage.
        rate: if given, each call (while ``times`` lasts) fails with this probability.
        rng: the randomness for ``rate`` (seed it for repeatable runs).
        match: if given, only calls whose API params it accepts may fail (e.g. a
            SendMessage to a DLQ: ``lambda p: p["QueueUrl"].endswith("-dlq")``).
        codes: several (code, status) pairs to pick from at random, instead of one.
    """

    def __init__(
        self,
        client: Any,
        operation: str,
        *,
        code: str = "ThrottlingException",
        status: int = 400,
        times: int = 1_000_000,
        rate: float | None = None,
        rng: random.Random | None = None,
        match: Callable[[dict[str, Any]], bool] | None = None,
        codes: Iterable[tuple[str, int]] = (),
    ) -> None:
        self._codes = list(codes) or [(code, status)]
        self.remaining = times
        self.rate = rate
        self._rng = rng or random.Random(0)
        self._match = match
        self.failed_calls = 0
        self._events = client.meta.events
        self._handlers: list[tuple[str, Callable[..., Any]]] = [(f"before-call.{operation}", self._fail)]
        if match is not None:
            self._handlers.append((f"provide-client-params.{operation}", self._check_match))
        for event, handler in self._handlers:
            self._events.register(event, handler)

    def _check_match(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        assert self._match is not None
        context[f"faults.match.{id(self)}"] = self._match(params)

    def _fail(self, context: dict[str, Any] | None = None, **_: Any) -> Any:
        if self.remaining <= 0:
            return None
        if self._match is not None and not (context or {}).get(f"faults.match.{id(self)}"):
            return None
        if self.rate is not None and self._rng.random() >= self.rate:
            return None
        self.remaining -= 1
        self.failed_calls += 1
        return _error(*self._rng.choice(self._codes))

    def remove(self) -> None:
        """Stop injecting: unregister from the client."""
        for event, handler in self._handlers:
            self._events.unregister(event, handler)


class EnforceSqsSizeLimit:
    """AWS's message-size rule, which moto lacks: SQS counts a message's body
    *and* its attributes (name, data type, value) against 1 MiB; moto counts
    the body's characters only. A SendMessage over the limit fails with
    AWS's error; a SendMessageBatch over it, per entry or in total, fails whole."""

    LIMIT = 1_048_576

    def __init__(self, client: Any) -> None:
        self.rejected = 0
        events = client.meta.events
        events.register("provide-client-params.sqs.SendMessage", self._check_one)
        events.register("provide-client-params.sqs.SendMessageBatch", self._check_batch)
        events.register("before-call.sqs.SendMessage", self._reject)
        events.register("before-call.sqs.SendMessageBatch", self._reject)

    @classmethod
    def size(cls, entry: dict[str, Any]) -> int:
        from jobkit.sqs import message_size

        return message_size(entry["MessageBody"], entry.get("MessageAttributes") or {})

    def _check_one(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        size = self.size(params)
        if size > self.LIMIT:
            context["faults.too_long"] = ("InvalidParameterValue", f"Message must be shorter than {self.LIMIT} bytes.")

    def _check_batch(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        total = sum(self.size(e) for e in params["Entries"])
        if total > self.LIMIT:
            context["faults.too_long"] = ("BatchRequestTooLong", f"Batch requests cannot be longer than {self.LIMIT}")

    def _reject(self, context: dict[str, Any] | None = None, **_: Any) -> Any:
        problem = (context or {}).get("faults.too_long")
        if problem is None:
            return None
        self.rejected += 1
        return _error(problem[0], 400, problem[1])


class EnforceSqsAttributeLimit:
    """AWS's rule that a message has at most 10 message attributes, which moto
    does not enforce: a SendMessage with more fails as AWS fails it."""

    LIMIT = 10

    def __init__(self, client: Any) -> None:
        self.rejected = 0
        events = client.meta.events
        events.register("provide-client-params.sqs.SendMessage", self._check)
        events.register("before-call.sqs.SendMessage", self._reject)

    def _check(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if len(params.get("MessageAttributes") or {}) > self.LIMIT:
            context["faults.too_many_attributes"] = True

    def _reject(self, context: dict[str, Any] | None = None, **_: Any) -> Any:
        if not (context or {}).get("faults.too_many_attributes"):
            return None
        self.rejected += 1
        return _error("InvalidParameterValue", 400, f"Number of message attributes cannot exceed {self.LIMIT}.")


class FaultSet:
    """Throttles and server errors on every SQS and DynamoDB operation of two
    clients, each call failing with probability ``rate``: the soak's weather.

    ``sqs_operations`` limits the SQS operations; by default every operation
    the push SDK, the runner and the (emulated) Lambda poller call.
    """

    SQS_OPERATIONS = (
        "SendMessageBatch",
        "SendMessage",
        "ChangeMessageVisibility",
        "DeleteMessage",
        "ReceiveMessage",
        "DeleteMessageBatch",
    )

    def __init__(
        self,
        sqs: Any,
        dynamodb: Any,
        *,
        rate: float,
        seed: int = 0,
        sqs_operations: Iterable[str] = SQS_OPERATIONS,
    ) -> None:
        rng = random.Random(seed)
        self.faults: dict[str, FailCalls] = {
            f"sqs.{op}": FailCalls(
                sqs, f"sqs.{op}", rate=rate, rng=rng, codes=[SQS_THROTTLE, SQS_SERVER_ERROR, SQS_UNAVAILABLE]
            )
            for op in sqs_operations
        }
        self.faults["dynamodb.*"] = FailCalls(
            dynamodb,
            "dynamodb.*",
            rate=rate,
            rng=rng,
            codes=[DYNAMODB_THROTTLE, DYNAMODB_CAPACITY, DYNAMODB_SERVER_ERROR],
        )

    @property
    def counts(self) -> dict[str, int]:
        return {name: fault.failed_calls for name, fault in self.faults.items()}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def stop(self) -> None:
        for fault in self.faults.values():
            fault.remaining = 0
