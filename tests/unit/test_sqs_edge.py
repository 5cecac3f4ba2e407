"""The SQS edge's mechanics, on fake clients: packing, retries, chunks, receive loops, delays."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import pytest

from jobkit.sqs import (
    Outgoing,
    SendFailure,
    SendResult,
    delay_seconds,
    delete_in_chunks,
    new_messages,
    pack_batches,
    release_in_chunks,
    send_with_retries,
)


def message(n: int, queue: str = "q", size: int = 10) -> Outgoing[int]:
    return Outgoing(n, queue, "x" * size, {})


def test_delays_round_up_and_stay_within_sqs_limits() -> None:
    assert [delay_seconds(s) for s in (-5, 0, 0.2, 1, 1.5, 899.1, 900, 10_000)] == [0, 0, 1, 1, 2, 900, 900, 900]
    assert delay_seconds(0.0, minimum=1) == 1
    assert delay_seconds(50, minimum=1, maximum=30) == 30


def test_batches_hold_one_queue_ten_entries_and_a_byte_budget_in_order() -> None:
    messages = [message(n, queue="a" if n % 3 else "b") for n in range(25)]
    batches = pack_batches(messages)
    assert all(len({m.queue_url for m in batch}) == 1 and len(batch) <= 10 for batch in batches)
    assert sorted(m.item for batch in batches for m in batch) == list(range(25))
    assert [
        [m.item for m in batch] for batch in pack_batches([message(n, size=400) for n in range(5)], max_bytes=1000)
    ] == [
        [0, 1],
        [2, 3],
        [4],
    ]


def test_an_attribute_counts_toward_the_size() -> None:
    plain = Outgoing(0, "q", "body", {})
    typed = Outgoing(0, "q", "body", {"JobType": {"DataType": "String", "StringValue": "noop"}})
    assert (plain.size, typed.size) == (4, 4 + len("JobType") + len("String") + len("noop"))
    assert "DelaySeconds" not in plain.entry("0") and Outgoing(0, "q", "b", {}, 5).entry("0")["DelaySeconds"] == 5


class Flaky:
    """Refuses given items: retryably the given number of times, or for good."""

    def __init__(self, retryable: dict[int, int], permanent: set[int]) -> None:
        self.retryable, self.permanent, self.calls = retryable, permanent, 0

    def __call__(self, batch: Sequence[Outgoing[int]]) -> SendResult[int]:
        self.calls += 1
        result: SendResult[int] = SendResult()
        for m in batch:
            if m.item in self.permanent:
                result.failed.append(SendFailure(m, "InvalidParameterValue", "no", retryable=False))
            elif self.retryable.get(m.item, 0) > 0:
                self.retryable[m.item] -= 1
                result.failed.append(SendFailure(m, "InternalError", "later", retryable=True))
            else:
                result.sent.append(m)
        return result


def test_retryable_failures_are_sent_again_and_permanent_ones_are_not() -> None:
    send = Flaky(retryable={1: 2, 2: 9}, permanent={3})
    waits: list[float] = []
    result = send_with_retries(send, [message(n) for n in range(5)], max_attempts=3, sleep=waits.append)
    assert [m.item for m in result.sent] == [0, 4, 1]
    assert [(f.outgoing.item, f.code) for f in result.failed] == [(3, "InvalidParameterValue"), (2, "InternalError")]
    assert send.calls == 3 and waits == [0.1, 0.2]


class FakeSqs:
    """Answers batch requests: refuses the entries of ``refuse``, raises on the requests of ``explode``."""

    def __init__(self, refuse: Collection[str] = (), explode: Collection[int] = ()) -> None:
        self.requests: list[dict[str, Any]] = []
        self._refuse, self._explode = refuse, explode

    def delete_message_batch(self, **request: Any) -> dict[str, Any]:
        return self._answer(request)

    def change_message_visibility_batch(self, **request: Any) -> dict[str, Any]:
        return self._answer(request)

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        if len(self.requests) in self._explode:
            raise ConnectionError("reset")
        entries = request["Entries"]
        return {
            "Successful": [{"Id": e["Id"]} for e in entries if e["ReceiptHandle"] not in self._refuse],
            "Failed": [{"Id": e["Id"], "Message": "gone"} for e in entries if e["ReceiptHandle"] in self._refuse],
        }


def test_deletes_go_ten_at_a_time_and_say_what_failed() -> None:
    sqs = FakeSqs(refuse={"h3"}, explode={2})
    items = [f"h{n}" for n in range(25)]
    chunks = list(delete_in_chunks(sqs, "url", items, str, catching=(ConnectionError,)))
    assert [len(c.items) for c in chunks] == [10, 10, 5]
    assert (chunks[0].failed, len(chunks[0].done)) == ([("h3", "gone")], 9)
    assert isinstance(chunks[1].error, ConnectionError) and chunks[1].done == []
    assert [len(r["Entries"]) for r in sqs.requests] == [10, 10, 5]


def test_an_error_not_caught_stops_at_its_chunk() -> None:
    sqs = FakeSqs(explode={1})
    with pytest.raises(ConnectionError):
        list(delete_in_chunks(sqs, "url", ["a"] * 15, str))
    assert len(sqs.requests) == 1


def test_releasing_sets_the_visibility_to_zero() -> None:
    sqs = FakeSqs()
    [chunk] = release_in_chunks(sqs, "url", ["a", "b"], str)
    assert chunk.done == ["a", "b"]
    assert sqs.requests == [
        {
            "QueueUrl": "url",
            "Entries": [{"Id": str(n), "ReceiptHandle": h, "VisibilityTimeout": 0} for n, h in enumerate("ab")],
        }
    ]


def receiver(*answers: list[str]) -> tuple[Any, list[int]]:
    """A receive that answers the given message IDs in turn, then nothing; and what it was asked for."""
    asked: list[int] = []
    queue = list(answers)

    def receive(wanted: int) -> list[dict[str, Any]]:
        asked.append(wanted)
        return [{"MessageId": i} for i in (queue.pop(0) if queue else [])[:wanted]]

    return receive, asked


def test_receiving_stops_at_the_first_receive_with_nothing_new() -> None:
    receive, asked = receiver(["a", "b"], ["b"], ["c"])
    assert [[m["MessageId"] for m in batch] for batch in new_messages(receive)] == [["a", "b"]]
    assert asked == [10, 10]


def test_receiving_keeps_going_while_messages_are_expected() -> None:
    receive, _ = receiver(["a"], [], ["a"], ["b"], [], [], [], ["c"])
    seen: set[str] = set()
    batches = list(new_messages(receive, seen=seen, expected=3, max_fruitless=3))
    assert [[m["MessageId"] for m in batch] for batch in batches] == [["a"], ["b"]]
    assert seen == {"a", "b"}


def test_receiving_asks_for_no_more_than_the_limit() -> None:
    receive, asked = receiver([str(n) for n in range(10)], [str(n) for n in range(10, 20)])
    assert sum(len(batch) for batch in new_messages(receive, limit=13)) == 13
    assert asked == [10, 3]


def test_a_binary_attribute_is_sent_again_as_the_bytes_it_was() -> None:
    from jobkit.sqs.attributes import sendable_attributes

    # Lambda's event spells binary values as base64 text; ReceiveMessage (boto3) as bytes
    lambda_shaped = {"trace": {"dataType": "Binary", "binaryValue": "AAH/dHJhY2U="}}
    boto_shaped = {"trace": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfftrace"}}
    assert sendable_attributes(lambda_shaped) == sendable_attributes(boto_shaped)
    assert sendable_attributes(lambda_shaped)["trace"] == {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfftrace"}


def test_the_characters_sqs_refuses_are_exactly_those_outside_its_allowed_ranges() -> None:
    # SendMessage takes #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF only;
    # the pattern names the rest (a negated class of the allowed ranges is slow to compile)
    from jobkit.core.wire import NOT_SQS_TEXT

    def allowed(code: int) -> bool:
        return code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000

    wrong = [code for code in range(0x110000) if (NOT_SQS_TEXT.match(chr(code)) is None) != allowed(code)]
    assert wrong == []
