"""De-duplication scenarios on moto, in the manner of MediaWiki's JobQueueTest
(testRootDeduplication, testDeduplicationWhileClaimed) and change-prop's
job_rules tests (sha1 + execution time, root signatures).

Time is a frozen virtual clock: it only moves when a test moves it, so "started
after it was enqueued" is always an explicit step.
"""

from __future__ import annotations

import json
from collections import Counter

from jobkit import JobSpecification, NonRetryableError
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.local import LocalStack
from jobkit.local.esm import sqs_event
from jobkit.records.keys import JobRef

from testjobs import HOOKS, RUNS


def executions(job_type: str) -> list[str]:
    return [job_id for t, job_id, event in RUNS if t == job_type and event == "run"]


def outcomes(stack: LocalStack, job_type: str) -> Counter[Outcome]:
    return stack.results.outcomes(job_type)


# -- ignoreDuplicates -----------------------------------------------------------------------


def test_three_identical_jobs_pushed_before_any_runs_execute_once(stack: LocalStack) -> None:
    # Given three identical remove-duplicates jobs (differing only in an ignored param)
    stack.queue_group("enwiki").push(
        [JobSpecification("dedup", {"title": "Main Page", "cause": cause}) for cause in ("edit", "purge", "edit")]
    )
    # When they run, after they were enqueued
    stack.clock.advance(1)
    stack.drain()
    # Then one executes and two are counted as duplicates
    assert len(executions("dedup")) == 1
    assert outcomes(stack, "dedup") == {Outcome.SUCCEEDED: 1, Outcome.DUPLICATE: 2}


def test_jobs_that_differ_in_params_or_domain_all_run(stack: LocalStack) -> None:
    group = stack.queue_group("enwiki")
    group.push(JobSpecification("dedup", {"title": "A"}))
    group.push(JobSpecification("dedup", {"title": "B"}))
    group.for_domain("dewiki").push(JobSpecification("dedup", {"title": "A"}))
    stack.clock.advance(1)
    stack.drain()
    assert outcomes(stack, "dedup") == {Outcome.SUCCEEDED: 3}


def test_a_twin_delivered_while_the_first_runs_is_deferred_then_a_duplicate(stack: LocalStack) -> None:
    # Given two identical jobs, both enqueued before either runs (one per batch)
    first, twin = (JobSpecification("hooked", {"page": "X"}) for _ in range(2))
    stack.queue_group().push([first, twin])
    stack.clock.advance(1)
    # When the twin is delivered while the first is running
    HOOKS.append(lambda: stack.poll_once())
    stack.drain()
    # Then the twin was deferred, not dropped and not run alongside; once the
    # first succeeded, the twin (enqueued before that run started) is a duplicate
    assert executions("hooked") == [first.id]
    twin_results = [r.outcome for r in stack.results.results if r.job_id == twin.id]
    assert twin_results == [Outcome.DEFERRED, Outcome.DUPLICATE]
    # and the deferral did not use up an attempt
    assert all(r.attempt == 1 for r in stack.results.results if r.job_id == twin.id)


def test_a_twin_pushed_while_the_first_runs_runs_afterwards(stack: LocalStack) -> None:
    first = JobSpecification("hooked", {"page": "X"})
    twin = JobSpecification("hooked", {"page": "X", "cause": "a later edit"})
    stack.queue_group().push(first)
    stack.clock.advance(1)

    def push_twin_and_deliver_it() -> None:
        stack.clock.advance(1)  # the twin is enqueued after the first started
        stack.queue_group().push(twin)
        stack.poll_once()

    HOOKS.append(push_twin_and_deliver_it)
    stack.drain()
    assert executions("hooked") == [first.id, twin.id]
    assert [r.outcome for r in stack.results.results if r.job_id == twin.id] == [Outcome.DEFERRED, Outcome.SUCCEEDED]


def test_a_twin_whose_superseding_run_failed_still_runs(stack: LocalStack) -> None:
    # Given J and its twin T, both enqueued; T is delivered while J runs, and J fails for good
    j, t = (JobSpecification("hooked", {"page": "X"}) for _ in range(2))
    stack.queue_group().push([j, t])
    stack.clock.advance(1)

    def deliver_twin_then_fail() -> bool:
        stack.poll_once()
        raise NonRetryableError("J fails for good")

    HOOKS.append(deliver_twin_then_fail)
    stack.drain()
    # Then T, deferred while J held the claim, runs once J's failure released it
    assert executions("hooked") == [j.id, t.id]
    assert [r.outcome for r in stack.results.results if r.job_id == t.id] == [Outcome.DEFERRED, Outcome.SUCCEEDED]
    assert [r.outcome for r in stack.results.results if r.job_id == j.id] == [Outcome.DEAD_LETTERED]


def test_a_failed_run_that_is_retried_can_make_its_twin_a_duplicate(stack: LocalStack) -> None:
    # Given J fails once while its twin T waits; J's retry (which started after
    # T was enqueued) or T itself may run next: either way the work runs exactly
    # once more, and the other is a duplicate of that successful run.
    j, t = (JobSpecification("hooked", {"page": "X"}) for _ in range(2))
    stack.queue_group().push([j, t])
    stack.clock.advance(1)

    def deliver_twin_then_fail() -> bool:
        stack.poll_once()
        return False

    HOOKS.append(deliver_twin_then_fail)
    stack.drain()
    assert len(executions("hooked")) == 2  # J's failed run, then one successful run
    final = [r for r in stack.results.results if r.outcome.is_final]
    assert sorted(r.outcome for r in final) == [Outcome.DUPLICATE, Outcome.SUCCEEDED]


def test_a_claim_whose_lease_lapsed_is_taken_over(stack: LocalStack) -> None:
    # Given a claim left behind by a runner that died (its lease is the Lambda's remaining time)
    twin = JobSpecification("dedup", {"title": "Main Page"})
    store = stack.dedup_store()
    lost = JobSpecification("dedup", {"title": "Main Page"})
    key = lost.dedup_hash(["cause"])
    stack.records.claim_duplicate("dedup", key, "dead-runner", stack.clock.now(), stack.clock.now() + 60, 0.0, 2**31)
    stack.queue_group().push(twin)
    # When the twin arrives before the lease lapses, it waits; after, it runs
    stack.clock.advance(1)
    stack.poll_once()
    assert [r.outcome for r in stack.results.results] == [Outcome.DEFERRED]
    stack.drain()
    assert executions("dedup") == [twin.id]
    assert store is not None


# -- root jobs ------------------------------------------------------------------------------


def test_a_newer_root_supersedes_exactly_the_older_leaves(stack: LocalStack) -> None:
    group = stack.queue_group("enwiki")
    key = "htmlCacheUpdate:templatelinks:Template:Infobox"
    root_a = new_root_job_params(key, stack.clock.now())
    old = [JobSpecification("leaf", {"n": n, **root_a}) for n in range(5)]
    group.push(old)
    # Given a newer root A' of the same signature, and its own five leaves
    stack.clock.advance(10)
    root_a2 = new_root_job_params(key, stack.clock.now())
    group.deduplicate_root_job(JobSpecification("leaf", root_a2))
    new = [JobSpecification("leaf", {"n": n, **root_a2}) for n in range(5)]
    # and five more leaves with A''s timestamp exactly: equal is not older
    equal = [JobSpecification("leaf", {"n": n + 5, **root_a2}) for n in range(5)]
    group.push([*new, *equal])
    stack.drain()
    assert sorted(executions("leaf")) == sorted(s.id for s in new + equal)
    superseded = {r.job_id for r in stack.results.results if r.outcome is Outcome.SUPERSEDED}
    assert superseded == {s.id for s in old}


def test_pushing_a_root_job_records_its_timestamp(stack: LocalStack) -> None:
    # Given leaves of an old root, still queued
    key = "fan"
    old_root = new_root_job_params(key, stack.clock.now())
    old_leaves = [JobSpecification("fanOut", {"n": n, **old_root}) for n in range(3)]
    stack.queue_group().push(old_leaves)
    # When a new root job is pushed (rootJobIsSelf), before anything runs
    stack.clock.advance(5)
    new_root = JobSpecification("fanOut", {"leaves": 2, **new_root_job_params(key, stack.clock.now())})
    stack.queue_group().push(new_root)
    stack.drain()
    # Then the old leaves are superseded; the new root and its own leaves run
    assert outcomes(stack, "fanOut") == {Outcome.SUPERSEDED: 3, Outcome.SUCCEEDED: 3}
    superseded = {r.job_id for r in stack.results.results if r.outcome is Outcome.SUPERSEDED}
    assert superseded == {s.id for s in old_leaves}


def test_roots_are_per_domain(stack: LocalStack) -> None:
    params = new_root_job_params("k", stack.clock.now())
    stack.queue_group("enwiki").push(JobSpecification("leaf", params))
    stack.clock.advance(1)
    stack.queue_group("dewiki").deduplicate_root_job(
        JobSpecification("leaf", new_root_job_params("k", stack.clock.now()))
    )
    stack.drain()
    assert outcomes(stack, "leaf") == {Outcome.SUCCEEDED: 1}


# -- deliver_once ----------------------------------------------------------------------------


def test_the_same_message_delivered_twice_runs_once(stack: LocalStack) -> None:
    spec = JobSpecification("once", {"to": "a@example.org"})
    stack.queue_group().push(spec)
    url = stack.queue_urls["test-once"]
    [message] = stack.sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"])["Messages"]
    event = sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:test-once")
    runner = stack.runners["once"]
    # When SQS delivers the same message twice (at-least-once delivery)
    first = runner.process(event)
    second = runner.process(event)
    # Then the job runs once; the second delivery is acknowledged without running
    assert executions("once") == [spec.id]
    assert [r.outcome for r in first + second] == [Outcome.SUCCEEDED, Outcome.REDELIVERED]


def test_a_second_delivery_during_the_run_waits(stack: LocalStack) -> None:
    spec = JobSpecification("once", {"to": "a@example.org"})
    stack.queue_group().push(spec)
    url = stack.queue_urls["test-once"]
    [message] = stack.sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"])["Messages"]
    event = sqs_event([message], "arn:aws:sqs:us-east-1:123456789012:test-once")
    runner = stack.runners["once"]
    during: list[Outcome] = []
    HOOKS.append(lambda: during.extend(r.outcome for r in runner.process(event)))
    assert [r.outcome for r in runner.process(event)] == [Outcome.SUCCEEDED]
    assert during == [Outcome.DEFERRED]
    stack.clock.advance(60)
    stack.drain()  # the deferred copy comes back, finds the job done
    assert executions("once") == [spec.id]
    assert [r.outcome for r in stack.results.results if r.job_id == spec.id][-1] is Outcome.REDELIVERED


def test_a_failed_attempt_releases_the_delivery_claim(stack: LocalStack) -> None:
    spec = JobSpecification("once", {"to": "a@example.org"})
    HOOKS.append(lambda: False)
    stack.queue_group().push(spec)
    stack.drain()
    assert executions("once") == [spec.id, spec.id]
    assert [r.outcome for r in stack.results.attempts(spec.id)] == [Outcome.RETRIED, Outcome.SUCCEEDED]


# -- failure records -----------------------------------------------------------------------------


def test_every_failed_attempt_leaves_a_failure_record(stack: LocalStack) -> None:
    spec = JobSpecification("alwaysFails", {"why": "a bug"}, domain="enwiki")
    stack.queue_group().push(spec)
    stack.drain()
    records = stack.journal().failures(JobRef(spec.type, spec.domain, spec.id))
    assert [r.attempt for r in records] == [3, 2, 1]  # newest first
    assert {(r.error_class, r.message, r.job_type, r.domain) for r in records} == {
        ("RuntimeError", "always fails (a bug)", "alwaysFails", "enwiki")
    }
    assert "RuntimeError: always fails" in records[0].traceback
    items = stack.dynamodb.query(
        TableName=stack.declaration.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"alwaysFails#runs#{spec.id}"}},
    )["Items"]
    for item in items:  # kept as long as the DLQ keeps the message: 14 days
        at = item["at"] if "at" in item else item["started_at"]  # a failure, or the final-attempt record
        assert int(item["expires_at"]["N"]) == int(float(at["N"])) + 14 * 24 * 3600


def test_a_poison_message_with_a_job_id_has_no_failure_record_but_a_reason(stack: LocalStack) -> None:
    body = json.dumps({"v": 1, "id": "poison-1", "type": "nope", "params": {}, "enqueuedAt": 1})
    stack.sqs.send_message(QueueUrl=stack.queue_urls["test-noop"], MessageBody=body)
    stack.drain()
    [dead] = stack.dead_letters("noop")
    assert dead["MessageAttributes"]["jobkit.errorClass"]["StringValue"] == "UnknownJobType"
    assert stack.journal().failures(JobRef("nope", None, "poison-1")) == []


def test_a_root_sent_without_being_recorded_supersedes_older_leaves_ahead_of_it_in_its_batch(
    stack: LocalStack,
) -> None:
    # A producer that sends bodies alone (another language's) does not record its
    # roots at push: the runner meets the root in the same batch as stale leaves.
    key = "htmlCacheUpdate:templatelinks:Template:Infobox"
    old_root = {k: v for k, v in new_root_job_params(key, stack.clock.now()).items() if k != "rootJobIsSelf"}
    stack.clock.advance(10)
    new_root = new_root_job_params(key, stack.clock.now())
    old = [JobSpecification("leaf", {"n": n, **old_root}).stamped(stack.clock.now()) for n in range(3)]
    root = JobSpecification("leaf", {"n": "root", **new_root}).stamped(stack.clock.now())
    url = stack.queue_urls[stack.declaration.queue_name("leaf")]
    for spec in [*old, root]:  # the stale leaves first, then the new root: one batch
        stack.sqs.send_message(QueueUrl=url, MessageBody=spec.to_message())
    stack.drain()
    assert executions("leaf") == [root.id]
    superseded = [r.job_id for r in stack.results.results if r.outcome is Outcome.SUPERSEDED]
    assert sorted(superseded) == sorted(s.id for s in old)
    # because the root ran first in its batch
    assert stack.results.results[0].job_id == root.id


def test_a_root_record_from_the_future_supersedes_nothing(stack: LocalStack) -> None:
    # A producer that records its root in milliseconds, following the documented request
    key = "htmlCacheUpdate:templatelinks:Template:Infobox"
    params = new_root_job_params(key, stack.clock.now())
    stack.dynamodb.update_item(
        TableName=stack.declaration.table_name,
        Key={"pk": {"S": f"leaf#root#{params['rootJobSignature']}"}, "sk": {"S": "-"}},
        UpdateExpression="SET root_ts = :ts",
        ExpressionAttributeValues={":ts": {"N": str(int(stack.clock.now() * 1000))}},
    )
    leaf = JobSpecification("leaf", {"n": 1, **{k: v for k, v in params.items() if k != "rootJobIsSelf"}})
    stack.queue_group().push(leaf)
    stack.drain()
    # the leaf runs: a record no clock could have made would supersede every root for 28 days
    assert executions("leaf") == [leaf.id]
    again = JobSpecification("leaf", {"n": 2, **{k: v for k, v in params.items() if k != "rootJobIsSelf"}})
    stack.queue_group().push(again)
    stack.drain()
    assert executions("leaf") == [leaf.id, again.id]  # nor from the container's cache
