"""Fairness: push sets each message's MessageGroupId from its type's key, every
copy the runner and the ops tools send keeps it, and the local stack delivers
grouped messages as an SQS fair queue does (docs/flow-control.md, "Fairness").

Everything goes through boto3 on moto: the group IDs are read back from SQS.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.local import LocalStack
from jobkit.local.esm import lambda_record
from jobkit.ops import redrive, resolve_scope
from jobkit.sqs import DeadLetterReason, QueueDirectory, SqsQueues, receive_messages


def received(stack: LocalStack, queue: str, *, dlq: bool = False, wanted: int = 10) -> list[Any]:
    """Receive up to ``wanted`` messages of a queue (hidden for 60 s), as the poller would."""
    messages: list[Any] = []
    while len(messages) < wanted:
        batch = receive_messages(stack.sqs, stack.queue_url(queue, dlq=dlq), wanted - len(messages))
        if not batch:
            break
        messages += batch
    return messages


def group_of(message: Any) -> str | None:
    return message.get("Attributes", {}).get("MessageGroupId")


def groups_pushed(
    stack: LocalStack, queue: str, specs: list[JobSpecification], domain: str | None = None
) -> list[str | None]:
    """Push specs, receive them, and say which group each came with, in push order."""
    ids = stack.queue_group(domain).push(specs)
    by_id = {json.loads(m["Body"])["id"]: group_of(m) for m in received(stack, queue, wanted=len(specs))}
    assert sorted(by_id) == sorted(ids)
    return [by_id[job_id] for job_id in ids]


def sha1(text: str) -> str:
    return "h:" + hashlib.sha1(text.encode()).hexdigest()


# -- push -------------------------------------------------------------------------------


def test_the_default_key_is_the_domain(stack: LocalStack) -> None:
    specs = [JobSpecification("noop", {"n": 1}), JobSpecification("noop", {"n": 2}, domain="dewiki")]
    assert groups_pushed(stack, "noop", specs, domain="enwiki") == ["enwiki", "dewiki"]


def test_a_job_without_a_domain_has_no_group(stack: LocalStack) -> None:
    assert groups_pushed(stack, "noop", [JobSpecification("noop", {"n": 1})]) == [None]


def test_a_param_key_groups_by_the_param_s_value(stack: LocalStack) -> None:
    specs = [
        JobSpecification("fairByParam", {"tenant": "acme"}),
        JobSpecification("fairByParam", {"tenant": 42}),
        JobSpecification("fairByParam", {"tenant": {"b": 1, "a": [1, 2]}}),
        JobSpecification("fairByParam", {"other": "x"}),  # no value for the key: no group
    ]
    groups = groups_pushed(stack, "fairness", specs, domain="enwiki")
    assert groups == ["acme", "42", '{"a":[1,2],"b":1}', None]


def test_a_type_key_groups_the_whole_type(stack: LocalStack) -> None:
    specs = [JobSpecification("fairByType", {"n": n}, domain=f"wiki{n}") for n in range(3)]
    assert groups_pushed(stack, "fairness", specs) == ["fairByType"] * 3


def test_fairness_false_sends_no_group(stack: LocalStack) -> None:
    specs = [JobSpecification("unfair", {"tenant": "acme"}, domain="enwiki")]
    assert groups_pushed(stack, "fairness", specs) == [None]


def test_values_sqs_would_refuse_are_hashed_and_never_collide(stack: LocalStack) -> None:
    fits = "x" * 128
    long_a, long_b = "y" * 128 + "a", "y" * 128 + "b"  # the same first 128 characters
    very_long = "z" * 300  # over the key's own 200: hashed by the key already, still h: and 40 hex
    values = [fits, long_a, long_b, "with space", "naïve", "", "h:looks-hashed", very_long]
    specs = [JobSpecification("fairByParam", {"tenant": v}) for v in values]
    groups = groups_pushed(stack, "fairness", specs)
    assert groups[:7] == [
        fits,
        sha1(long_a),
        sha1(long_b),
        sha1("with space"),
        sha1("naïve"),
        sha1(""),
        sha1("h:looks-hashed"),
    ]
    assert groups[7] is not None and groups[7].startswith("h:") and len(groups[7]) == 42
    assert len(set(groups)) == len(groups)


def test_lazy_push_sets_the_same_groups(stack: LocalStack) -> None:
    group = stack.queue_group("enwiki")
    with group.deferred():
        group.lazy_push([JobSpecification("noop", {"n": 1}), JobSpecification("fairByParam", {"tenant": "acme"})])
    assert [group_of(m) for m in received(stack, "noop")] == ["enwiki"]
    assert [group_of(m) for m in received(stack, "fairness")] == ["acme"]


def test_bulk_push_still_costs_a_tenth_of_a_request_per_job(stack: LocalStack, sqs_requests: Any) -> None:
    stack.queue_group("enwiki").push([JobSpecification("noop", {"n": n}) for n in range(100)])
    assert sqs_requests.calls["SendMessageBatch"] == 10 and sqs_requests.total <= 11  # one GetQueueUrl at most


# -- copies keep the group ----------------------------------------------------------------


def test_a_delay_hop_keeps_the_group(stack: LocalStack) -> None:
    # A job released in an hour hops (SQS delays at most 900 s): the runner sends it again
    stack.queue_group("enwiki").push(JobSpecification("noop", {"n": 1}, delay=3600))
    stack.clock.advance(901)
    assert stack.poll_once() == 1
    stack.clock.advance(901)
    (copy,) = received(stack, "noop")
    assert group_of(copy) == "enwiki"
    assert copy["Attributes"]["ApproximateReceiveCount"] == "1"  # a new message: the copy


def test_requeue_and_dead_letter_keep_the_record_s_group(stack: LocalStack) -> None:
    stack.queue_group("enwiki").push([JobSpecification("noop", {"n": 1}), JobSpecification("noop", {"n": 2})])
    first, second = received(stack, "noop")
    queues = SqsQueues(stack.sqs, QueueDirectory(stack.sqs, stack.declaration), "noop")
    arn = stack.queue_arn("noop")
    queues.requeue(lambda_record(first, arn), 0)
    queues.dead_letter(lambda_record(second, arn), DeadLetterReason("poison", "SpecError", "bad", 1), 0.0)
    assert [group_of(m) for m in received(stack, "noop")] == ["enwiki"]
    assert [group_of(m) for m in received(stack, "noop", dlq=True)] == ["enwiki"]
    # and a record without a group is copied without one
    stack.queue_group().push(JobSpecification("noop", {"n": 3}))
    (plain,) = received(stack, "noop")
    queues.requeue(lambda_record(plain, arn), 0)
    assert [group_of(m) for m in received(stack, "noop")] == [None]


def test_dead_letters_and_their_redrive_keep_the_group(stack: LocalStack) -> None:
    stack.queue_group("enwiki").push([JobSpecification("alwaysFails", {"n": n}) for n in range(2)])
    stack.queue_group().push(JobSpecification("alwaysFails", {"n": 9}))
    stack.drain()
    assert sorted(str(group_of(m)) for m in stack.dead_letters("alwaysFails")) == ["None", "enwiki", "enwiki"]
    stack.clock.advance(1)  # they are visible again just after
    directory = QueueDirectory(stack.sqs, stack.declaration)
    report = redrive(stack.sqs, directory, resolve_scope(stack.declaration, "alwaysFails"))
    assert report.mode == "copy" and report.moved == 3  # moto has no StartMessageMoveTask
    assert sorted(str(group_of(m)) for m in received(stack, "alwaysFails")) == ["None", "enwiki", "enwiki"]


# -- the local stack delivers as a fair queue --------------------------------------------------


@pytest.mark.parametrize("fair", [True, False])
def test_a_quiet_domain_goes_ahead_of_a_backlog(stack: LocalStack, fair: bool) -> None:
    job_type = "fairByParam" if fair else "unfair"
    # Given a noisy tenant's backlog of 2,000, which the consumers have been at for a while
    group = stack.queue_group()
    group.push([JobSpecification(job_type, {"tenant": "noisy", "n": n}) for n in range(2000)])
    busy = received(stack, "fairness", wanted=50)
    # When a quiet tenant pushes 10 jobs
    group.push([JobSpecification(job_type, {"tenant": "quiet", "n": n}) for n in range(10)])
    # Then a fair queue gives them next, where a plain one makes them wait for the backlog
    following = received(stack, "fairness", wanted=10)
    tenants = {spec_tenant(m) for m in following}
    assert tenants == ({"quiet"} if fair else {"noisy"})
    assert len(busy) == 50


def spec_tenant(message: Any) -> str:
    return str(json.loads(message["Body"])["params"]["tenant"])


def test_among_noisy_tenants_the_one_with_fewest_in_flight_goes_first(stack: LocalStack) -> None:
    group = stack.queue_group()
    group.push([JobSpecification("fairByParam", {"tenant": "a", "n": n}) for n in range(100)])
    assert {spec_tenant(m) for m in received(stack, "fairness", wanted=60)} == {"a"}
    group.push([JobSpecification("fairByParam", {"tenant": "b", "n": n}) for n in range(100)])
    # b is quiet: it goes first until it is noisy too (over a tenth of recent receives)
    assert {spec_tenant(m) for m in received(stack, "fairness", wanted=10)} == {"b"}
    # now both are noisy (a: 60 in flight, b: 10 and over 10% of the receives): b has fewer in flight
    assert {spec_tenant(m) for m in received(stack, "fairness", wanted=30)} == {"b"}


def test_messages_without_a_group_keep_queue_order(stack: LocalStack) -> None:
    stack.queue_group("enwiki").push([JobSpecification("unfair", {"n": n}) for n in range(30)])
    order = [json.loads(m["Body"])["params"]["n"] for m in received(stack, "fairness", wanted=30)]
    assert order == list(range(30))
