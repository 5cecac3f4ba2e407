"""`jobkit verify` against a stack deployed from its template, as an operator runs it.

`jobkit local up --template` deploys the repo's template.yaml (its runners with
their RecursiveLoop, event source mappings and alarms) and runs the runners;
`jobkit verify` runs in its own process against it, knowing only the endpoint
and the declaration. On the stack as deployed every check passes and nothing
is left behind; a runner whose RecursiveLoop is put back to Lambda's default
fails the chain and recursion checks, with the setting to change; what verify
cannot run at all is one line and exit status 2.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from local_up import EXAMPLE_CONFIG, app_env, local_up_process, printed

from jobkit.declaration.config import Declaration, load_declaration

from conftest import ROOT

TEMPLATE = ROOT / "template.yaml"
#: Every check verify makes of each queue.
CHECKS = {
    "runs",
    "duplicate",
    "delay",
    "chain",
    "dead letter",
    "redrive policy",
    "recursive loop",
    "event source",
    "alarms",
}


@pytest.fixture(scope="module")
def declaration() -> Declaration:
    return load_declaration(EXAMPLE_CONFIG)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with local_up_process("--template", str(TEMPLATE)) as (process, lines):
        url = printed(lines, "AWS_ENDPOINT_URL")
        lines.wait_for("running jobs", timeout=120)
        yield url
        assert process.poll() is None, lines.seen[-20:]


def client(endpoint: str, service: str) -> Any:
    env = app_env(endpoint)
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


def verify(endpoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = app_env(endpoint)
    return subprocess.run(
        [sys.executable, "-m", "jobkit.cli", "verify", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )


def checks_of(done: subprocess.CompletedProcess[str]) -> dict[tuple[str, str], dict[str, Any]]:
    report = json.loads(done.stdout)
    return {(c["queue"], c["check"]): c for c in report["checks"]}


def depth(sqs: Any, name: str) -> int:
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def canary_items(endpoint: str, declaration: Declaration) -> list[dict[str, Any]]:
    items = client(endpoint, "dynamodb").scan(TableName=declaration.table_name)["Items"]
    return [item for item in items if "jobkitCanary" in json.dumps(item)]


def test_every_check_passes_on_the_stack_as_deployed_and_nothing_is_left_behind(
    endpoint: str, declaration: Declaration
) -> None:
    done = verify(endpoint, "--json", "--timeout", "90")
    assert done.returncode == 0, done.stdout + done.stderr
    checks = checks_of(done)
    assert set(checks) == {(queue, check) for queue in declaration.queues for check in CHECKS}
    assert all(c["ok"] for c in checks.values())
    for queue in declaration.queues:
        assert checks[(queue, "delay")]["late_s"] >= -1.0
        assert checks[(queue, "dead letter")]["reason"] == "non_retryable"
        assert "skipped" in checks[(queue, "duplicate")]["detail"]
    sqs = client(endpoint, "sqs")
    for queue in declaration.queues:
        assert depth(sqs, declaration.queue_name(queue)) == 0
        assert depth(sqs, declaration.dlq_name(queue)) == 0
    assert canary_items(endpoint, declaration) == []


def test_the_lines_say_what_passed_and_the_summary_counts_them(endpoint: str, declaration: Declaration) -> None:
    queue = sorted(declaration.queues)[0]
    job_type = next(t.name for t in declaration.types.values() if t.queue == queue)
    done = verify(endpoint, "--types", job_type, "--no-dead-letter", "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == f"{len(CHECKS) - 1} of {len(CHECKS) - 1} checks passed on 1 queue(s)"
    assert all(line.startswith("pass  ") for line in lines[:-1])
    assert not any("dead letter" in line for line in lines)
    assert depth(client(endpoint, "sqs"), declaration.dlq_name(queue)) == 0


def test_a_runner_without_recursive_loop_allow_fails_the_chain_and_says_what_to_change(
    endpoint: str, declaration: Declaration
) -> None:
    queue = sorted(declaration.queues)[-1]
    job_type = next(t.name for t in declaration.types.values() if t.queue == queue)
    lambda_ = client(endpoint, "lambda")
    runner = declaration.names.runner(queue)
    assert lambda_.get_function_recursion_config(FunctionName=runner)["RecursiveLoop"] == "Allow"
    lambda_.put_function_recursion_config(FunctionName=runner, RecursiveLoop="Terminate")  # Lambda's default
    try:
        done = verify(endpoint, "--types", job_type, "--json", "--timeout", "35")
    finally:
        lambda_.put_function_recursion_config(FunctionName=runner, RecursiveLoop="Allow")
    assert done.returncode == 1, done.stdout + done.stderr
    checks = checks_of(done)
    failed = {check for (_, check), c in checks.items() if not c["ok"]}
    assert failed == {"chain", "recursive loop"}
    assert "RecursiveLoop: Allow" in checks[(queue, "chain")]["detail"]
    assert "RecursiveLoop Terminate" in checks[(queue, "recursive loop")]["detail"]
    report = json.loads(done.stdout)
    assert report["ok"] is False
    # the stopped chain canary is named, with where it goes and how to delete it
    [chain] = [line for line in report["left_behind"] if "(chain)" in line]
    assert f"jobkit dlq delete {queue} canary-" in chain and declaration.dlq_name(queue) in chain
    assert "jobkit dlq delete" in checks[(queue, "chain")]["detail"]


def test_a_cancelled_verify_cleans_up_and_names_what_it_left(endpoint: str, declaration: Declaration) -> None:
    # Given a verify run that a CI job cancels (SIGTERM) once its canaries are out
    queue = sorted(declaration.queues)[0]
    job_type = next(t.name for t in declaration.types.values() if t.queue == queue)
    env = app_env(endpoint)
    args = [sys.executable, "-m", "jobkit.cli", "verify", "--types", job_type, "--json", "--timeout", "60"]
    with subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        sqs = client(endpoint, "sqs")
        deadline = time.monotonic() + 30
        while depth(sqs, declaration.queue_name(queue)) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    # Then it stops as an interrupted run: exit status 2, one JSON error that names
    # each canary whose fate it did not see, and no traceback
    assert run.returncode == 2, out + err
    error = json.loads(err)
    assert error["exit_status"] == 2 and error["error"].startswith("interrupted"), err
    assert "left behind" in error["error"] and "canary-" in error["error"]
    assert "Traceback" not in err


def test_verify_refuses_to_start_with_a_clock_far_from_aws(endpoint: str, declaration: Declaration) -> None:
    from jobkit.ops.config import CliConfig
    from jobkit.ops.verify import Clients, Verify, VerifyRefused

    config = CliConfig(config_path=EXAMPLE_CONFIG, endpoint_url=endpoint, region=app_env(endpoint)["AWS_REGION"])
    clients = Clients(config.sqs, config.clients.client("lambda"), config.cloudwatch, config.records)
    queue = declaration.queues[sorted(declaration.queues)[0]]
    names = (declaration.queue_name(queue.name), declaration.dlq_name(queue.name))
    urls = {name: config.sqs.get_queue_url(QueueName=name)["QueueUrl"] for name in names}
    for skew, said in [(900, r"(899|900|901) s ahead of AWS"), (-1000, r"(999|1000|1001) s behind AWS")]:
        run = Verify(declaration, clients, urls, now=lambda skew=skew: time.time() + skew, timeout_s=30)
        with pytest.raises(VerifyRefused, match=said):
            run.run([queue])
        assert run.left_behind == []  # refused before a canary was sent


def test_a_canary_an_earlier_run_left_in_a_dlq_is_reported_and_user_dead_letters_are_untouched(
    endpoint: str, declaration: Declaration
) -> None:
    queue = sorted(declaration.queues)[1]  # not the queue the cancelled run left canaries in
    job_type = next(t.name for t in declaration.types.values() if t.queue == queue)
    sqs = client(endpoint, "sqs")
    dlq = sqs.get_queue_url(QueueName=declaration.dlq_name(queue))["QueueUrl"]
    earlier = f"canary-0123456789-dlq-{queue}"
    sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"type": "jobkitCanary", "id": earlier, "params": {}}))
    sqs.send_message(QueueUrl=dlq, MessageBody="a user's dead letter, not JSON")
    try:
        done = verify(endpoint, "--types", job_type, "--json", "--timeout", "60")
        assert done.returncode == 0, done.stdout + done.stderr
        detail = checks_of(done)[(queue, "dead letter")]["detail"]
        assert "earlier runs" in detail and earlier in detail
        assert depth(sqs, declaration.dlq_name(queue)) == 2  # neither was verify's to delete
    finally:
        sqs.purge_queue(QueueUrl=dlq)


def test_a_timeout_verify_cannot_keep_is_a_usage_error(endpoint: str) -> None:
    for value in ("nan", "inf", "10", "901"):
        done = verify(endpoint, "--timeout", value)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "--timeout" in done.stderr and "Traceback" not in done.stderr


def test_what_verify_cannot_run_is_one_line_and_exit_status_2(endpoint: str) -> None:
    for done, said in [
        (verify(endpoint, "--prefix", "nothere"), "does not exist"),
        (verify(endpoint, "--types", "noSuchType"), "noSuchType"),
        (verify(f"http://127.0.0.1:{unused_port()}"), "could not reach SQS"),
    ]:
        assert done.returncode == 2, done.stdout + done.stderr
        assert said in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
