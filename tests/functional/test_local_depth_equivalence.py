"""The local stack's faster moto answers every SQS call as moto does.

The same random program of SQS calls (sends with and without delays, receives
with all sorts of visibility timeouts, deletes and visibility changes with
current, stale and bogus receipt handles, redrives to a DLQ, a queue whose
messages outlive their retention, purges, time passing, attribute reads)
runs through boto3 twice on moto, on a virtual clock: once as moto is, once
with :func:`jobkit.local.moto_patches.indexed_queues` and
:func:`~jobkit.local.moto_patches.memoised_moto`. Every answer must be the same
(receipt handles and message IDs are random: they are not compared). Both
runs have the local stack's other patches (the clock, AWS's visibility
limit, the retention check), which these do not change.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from jobkit.core.clock import VirtualClock
from jobkit.local.moto_patches import (
    aws_visibility_limit,
    faster_receives,
    indexed_queues,
    memoised_moto,
    moto_on_clock,
)

START = 1_800_000_000.0
STEPS = 400
COUNTS = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]


@contextlib.contextmanager
def moto(clock: VirtualClock, *, indexed: bool) -> Iterator[Any]:
    with contextlib.ExitStack() as patches:
        patches.enter_context(moto_on_clock(clock))
        patches.enter_context(aws_visibility_limit())
        patches.enter_context(faster_receives())
        if indexed:
            patches.enter_context(indexed_queues())
            patches.enter_context(memoised_moto())
        patches.enter_context(mock_aws())
        yield boto3.client("sqs", region_name="us-east-1")


class Program:
    """A random program of SQS calls; what each call answered, in order."""

    def __init__(self, sqs: Any, clock: VirtualClock, seed: int) -> None:
        self.sqs = sqs
        self.clock = clock
        self.rng = random.Random(seed)
        self.answers: list[Any] = []
        self.handles: list[str] = []  # every receipt handle handed out, stale ones too
        self.sent = 0
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})
        main = sqs.create_queue(QueueName="main", Attributes={"VisibilityTimeout": "10", "RedrivePolicy": redrive})
        short = sqs.create_queue(QueueName="short", Attributes={"MessageRetentionPeriod": "60"})
        self.urls = {"main": main["QueueUrl"], "short": short["QueueUrl"], "dlq": dlq}

    def run(self, steps: int) -> list[Any]:
        moves: list[tuple[int, Callable[[], None]]] = [
            (25, lambda: self.send("main")),
            (4, lambda: self.send("short")),
            (25, lambda: self.receive(self.rng.choice(["main", "main", "main", "short", "dlq"]))),
            (10, self.delete_batch),
            (4, self.delete_one),
            (10, self.change_visibility),
            (3, self.change_visibility_batch),
            (12, self.tick),
            (6, self.read_counts),
            (1, self.purge),
        ]
        weights = [weight for weight, _ in moves]
        for _ in range(steps):
            self.rng.choices([move for _, move in moves], weights)[0]()
        self.clock.advance(3600)
        for name in self.urls:
            self.read_counts(name)
            while self.receive(name, wanted=10, timeout=600):  # what is left, to the last message
                pass
        return self.answers

    def call(self, operation: str, **params: Any) -> Any:
        try:
            return getattr(self.sqs, operation)(**params)
        except ClientError as error:
            self.answers.append((operation, "error", error.response["Error"]["Code"]))
            return None

    def send(self, name: str) -> None:
        entries = []
        for i in range(self.rng.randint(1, 10)):
            self.sent += 1
            entries.append(
                {"Id": str(i), "MessageBody": f"{name} {self.sent}", "DelaySeconds": self.rng.choice([0, 0, 0, 3, 20])}
            )
        response = self.call("send_message_batch", QueueUrl=self.urls[name], Entries=entries)
        if response is not None:
            self.answers.append(("send", sorted(e["Id"] for e in response["Successful"]), response.get("Failed", [])))

    def receive(self, name: str, *, wanted: int | None = None, timeout: int | None = None) -> int:
        params: dict[str, Any] = {
            "QueueUrl": self.urls[name],
            "MaxNumberOfMessages": wanted or self.rng.randint(1, 10),
            "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        }
        visibility = self.rng.choice([None, 0, 2, 10, 40]) if timeout is None else timeout
        if visibility is not None:
            params["VisibilityTimeout"] = visibility
        response = self.call("receive_message", **params)
        messages = [] if response is None else response.get("Messages", [])
        self.handles += [m["ReceiptHandle"] for m in messages]
        got = [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in messages]
        self.answers.append(("receive", name, visibility, got))
        return len(messages)

    def handle(self) -> str:
        if not self.handles or self.rng.random() < 0.05:
            return "not-a-receipt-handle"
        return self.handles[self.rng.randrange(len(self.handles))]

    def delete_batch(self) -> None:
        handles = list(dict.fromkeys(self.handle() for _ in range(self.rng.randint(1, 5))))
        entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)]
        response = self.call("delete_message_batch", QueueUrl=self.urls["main"], Entries=entries)
        if response is not None:
            failed = sorted((f["Id"], f["Code"]) for f in response.get("Failed", []))
            self.answers.append(("delete", sorted(s["Id"] for s in response.get("Successful", [])), failed))

    def delete_one(self) -> None:
        name = self.rng.choice(["main", "short", "dlq"])
        if self.call("delete_message", QueueUrl=self.urls[name], ReceiptHandle=self.handle()) is not None:
            self.answers.append(("delete one", name, "ok"))

    def change_visibility(self) -> None:
        timeout = self.rng.choice([0, 0, 3, 30, 43_000])
        params = {"QueueUrl": self.urls["main"], "ReceiptHandle": self.handle(), "VisibilityTimeout": timeout}
        if self.call("change_message_visibility", **params) is not None:
            self.answers.append(("visibility", timeout, "ok"))

    def change_visibility_batch(self) -> None:
        handles = list(dict.fromkeys(self.handle() for _ in range(self.rng.randint(1, 4))))
        entries = [
            {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": self.rng.choice([0, 5])}
            for i, h in enumerate(handles)
        ]
        response = self.call("change_message_visibility_batch", QueueUrl=self.urls["main"], Entries=entries)
        if response is not None:
            failed = sorted((f["Id"], f["Code"]) for f in response.get("Failed", []))
            self.answers.append(("visibility batch", sorted(s["Id"] for s in response["Successful"]), failed))

    def tick(self) -> None:
        self.clock.advance(self.rng.choice([0.001, 0.5, 2, 3, 11, 21, 61]))

    def read_counts(self, name: str | None = None) -> None:
        name = name or self.rng.choice(list(self.urls))
        names = ["All"] if self.rng.random() < 0.3 else COUNTS
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.urls[name], AttributeNames=names)["Attributes"]
        self.answers.append(("counts", name, {k: attributes[k] for k in COUNTS}))

    def purge(self) -> None:
        if self.call("purge_queue", QueueUrl=self.urls["short"]) is not None:
            self.answers.append(("purge", "ok"))


def answers(seed: int, *, indexed: bool) -> list[Any]:
    clock = VirtualClock(START)
    with moto(clock, indexed=indexed) as sqs:
        return Program(sqs, clock, seed).run(STEPS)


@pytest.mark.parametrize("seed", range(6))
def test_every_answer_is_moto_s(seed: int) -> None:
    expected = answers(seed, indexed=False)
    assert answers(seed, indexed=True) == expected
    kinds = {answer[0] for answer in expected}
    assert {"receive", "delete", "visibility", "counts", "send"} <= kinds  # the program did exercise them


def test_a_queue_made_before_the_index_is_indexed_with_its_messages() -> None:
    clock = VirtualClock(START)
    with moto(clock, indexed=False) as sqs:
        url = sqs.create_queue(QueueName="early")["QueueUrl"]
        for n in range(30):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", DelaySeconds=5 if n % 3 == 0 else 0)
        first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=4)["Messages"]
        with indexed_queues():
            counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
            assert counts == {COUNTS[0]: "16", COUNTS[1]: "4", COUNTS[2]: "10"}
            sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
            clock.advance(5.001)
            bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
            assert bodies == ["m0", "m3", "m6", "m7", "m8", "m9", "m10", "m11", "m12", "m13"]
        # and when the index goes, moto's own code carries on with the same messages
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
        assert counts == {COUNTS[0]: "16", COUNTS[1]: "13", COUNTS[2]: "0"}
