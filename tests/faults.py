"""Fault injection at the botocore level, on real moto calls.

The faults sit where AWS's would: in the request/response path of a boto3
client, not in jobkit's code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class _FakeHttpResponse:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = {}
        self.content = b""


class FailBatchEntries:
    """Makes SendMessageBatch fail some entries: they are taken out of the real
    request (so they really are not sent) and reported under ``Failed``.

    Args:
        match: which entries to fail (gets the request entry).
        times: how many calls to interfere with (then it passes everything).
    """

    def __init__(
        self,
        client: Any,
        match: Callable[[dict[str, Any]], bool],
        *,
        code: str = "InternalError",
        sender_fault: bool = False,
        times: int = 1_000_000,
    ) -> None:
        self._match, self._code, self._sender_fault, self.remaining = match, code, sender_fault, times
        self.failed_entries = 0
        events = client.meta.events
        events.register("provide-client-params.sqs.SendMessageBatch", self._take_out)
        events.register("before-call.sqs.SendMessageBatch", self._short_circuit_if_empty)
        events.register("after-call.sqs.SendMessageBatch", self._report)

    def _take_out(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if self.remaining <= 0:
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
        operation: e.g. ``"sqs.SendMessageBatch"`` or ``"dynamodb.PutItem"``.
        times: how many calls fail; then calls pass.
    """

    def __init__(
        self,
        client: Any,
        operation: str,
        *,
        code: str = "ThrottlingException",
        status: int = 400,
        times: int = 1_000_000,
    ) -> None:
        self._code, self._status, self.remaining = code, status, times
        self.failed_calls = 0
        client.meta.events.register(f"before-call.{operation}", self._fail)

    def _fail(self, **_: Any) -> Any:
        if self.remaining <= 0:
            return None
        self.remaining -= 1
        self.failed_calls += 1
        error = {
            "Error": {"Code": self._code, "Message": "injected fault"},
            "ResponseMetadata": {"HTTPStatusCode": self._status},
        }
        return _FakeHttpResponse(self._status), error
