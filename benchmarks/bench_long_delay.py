"""What a long delay costs in hops: a job delayed by a day reaches its release
in delay hops of 900 s (SQS's longest delay), each one a receive, a send, a
delete and a Lambda invocation. Measured on the local stack (a virtual clock),
counted at the botocore level; the alternative priced beside it is a one-time
EventBridge Scheduler schedule per delayed job (docs/benchmarks.md, "Long
delays").

The event source mapping's own requests (receives and deletes) are counted as
the local emulator makes them: one ReceiveMessage and one DeleteMessageBatch
per invocation when, as here, the delayed jobs are spread out.
"""

from __future__ import annotations

from typing import Any

from _common import ApiCalls, aws_environment

START = 1_800_000_000.0
DAY_S = 86_400


def _declaration() -> Any:
    from jobkit.declaration.config import parse_declaration

    return parse_declaration(
        {"jobkit": {"prefix": "delaybench"}, "types": {"later": {"class": "bench_jobs:NoopJob"}}}, source="bench"
    )


def run(delay_s: int = DAY_S) -> dict[str, Any]:
    from jobkit import JobSpecification
    from jobkit.core.clock import VirtualClock
    from jobkit.core.outcome import Outcome
    from jobkit.local import LocalStack

    calls = ApiCalls()
    with (
        aws_environment(None),
        calls.counting(),
        LocalStack(_declaration(), clock=VirtualClock(START), seed=1) as stack,
    ):
        stack.queue_group("bench").push(JobSpecification("later", {}, delay=delay_s))
        calls.reset()
        stack.drain()
        outcomes = [r.outcome for r in stack.results.results]
        invocations = stack.mappings["later"].invocations
        released_at = stack.clock.now()
    return {
        "delay_s": delay_s,
        "hops": outcomes.count(Outcome.DELAYED),
        "invocations": invocations,
        "sqs_sends": calls.calls["sqs.SendMessage"],
        "sqs_requests": calls.total("sqs."),
        "dynamodb_requests": calls.total("dynamodb."),
        "ran": outcomes.count(Outcome.SUCCEEDED),
        "ran_late_s": round(released_at - START - delay_s, 3),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
