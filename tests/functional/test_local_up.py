"""`jobkit local up` serves the local stack to other processes and runs their jobs.

It prints jobkit's own lines only (a banner, then a line per job outcome),
never a line per HTTP request; a port in use is an error at once; and what it
measures is in its CloudWatch for `jobkit top` and `jobkit queues`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_up import app_env, jobkit_json, local_up_process, printed

from jobkit.core.errors import JobKitError
from jobkit.declaration.config import Declaration
from jobkit.local.serve import serve
from jobkit.local.server import PortInUse

from conftest import ROOT
from process_lines import Lines

PUSH = """
from jobkit import JobSpecification, correlation_scope, queue_group
with correlation_scope("req-local-1"):  # as the app's request middleware would
    [job_id] = queue_group("enwiki").push(JobSpecification("refreshLinks", {"title": "Main Page"}))
print(job_id)
"""
PUSH_20 = """
from jobkit import JobSpecification, queue_group
for job_id in queue_group("enwiki").push([JobSpecification("refreshLinks", {"title": f"P{n}"}) for n in range(20)]):
    print(job_id)
"""
#: Every line `jobkit local up` may print: its banner, a line per job outcome, and its goodbye.
JOBKIT_LINE = re.compile(
    r"jobkit local stack up: \d+ queues, table \S+"
    r"|point your app at it with:"
    r"|  export (AWS_ENDPOINT_URL|AWS_REGION|AWS_ACCESS_KEY_ID|JOBKIT_CONFIG|JOBKIT_PAYLOAD_BUCKET|JOBKIT_PUSH_URL)=.*"
    r"|running jobs; Ctrl-C stops"
    r"| *[a-z_]+ \w+ \S+ \(attempt \d+(, correlation \S+)?\)( in \d+ ms)?(: .*)?"
    r"| *log \w+ \S+: (DEBUG|INFO|WARNING|ERROR|CRITICAL) .*"
    r"|stopping"
)
#: What a web server's request log line looks like (werkzeug's: 127.0.0.1 - - [date] "POST / HTTP/1.1" 200 -).
REQUEST_LOG = re.compile(r'HTTP/\d\.\d"|\[\d{2}/\w{3}/\d{4}|\b(GET|POST) /')


def assert_only_jobkit_lines(lines: list[str]) -> None:
    """No request log, nor anything else that is not jobkit's (stderr is in these lines too)."""
    strays = [line for line in lines if not JOBKIT_LINE.fullmatch(line.rstrip("\n"))]
    assert strays == [], f"lines that are not jobkit's: {strays[:10]}"
    assert not [line for line in lines if REQUEST_LOG.search(line)]


@pytest.fixture
def local_up() -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    with local_up_process() as running:
        yield running


def test_an_app_in_another_process_pushes_and_the_job_runs(local_up: tuple[subprocess.Popen[str], Lines]) -> None:
    process, lines = local_up
    endpoint = printed(lines, "AWS_ENDPOINT_URL")
    assert endpoint.startswith("http://127.0.0.1:")
    # Given an app process that knows only the endpoint and the declaration
    pushed = subprocess.run(
        [sys.executable, "-c", PUSH], env=app_env(endpoint), capture_output=True, text=True, timeout=60
    )
    assert pushed.returncode == 0, pushed.stderr
    job_id = pushed.stdout.strip()
    # Then the local stack runs it
    line = lines.wait_for(job_id)
    assert "succeeded" in line and "refreshLinks" in line
    # naming the request that pushed it
    assert "(attempt 1, correlation req-local-1)" in line
    # And Ctrl-C stops it cleanly
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    lines.wait_for("stopping")
    # having printed jobkit's lines only, for every request the app made
    assert_only_jobkit_lines(lines.rest())


def test_top_and_queues_show_what_the_local_stack_measured(local_up: tuple[subprocess.Popen[str], Lines]) -> None:
    process, lines = local_up
    endpoint = printed(lines, "AWS_ENDPOINT_URL")
    # Given 20 jobs pushed from an app process, and run
    pushed = subprocess.run(
        [sys.executable, "-c", PUSH_20], env=app_env(endpoint), capture_output=True, text=True, timeout=60
    )
    assert pushed.returncode == 0, pushed.stderr
    for job_id in pushed.stdout.split():
        assert "succeeded" in lines.wait_for(job_id)
    # When an operator runs `jobkit top` against it, until the next publication
    # is in (every 5 s; a datapoint counts from the second after its stamp)
    deadline = time.monotonic() + 30
    while True:
        frame = jobkit_json(endpoint, "top", "--once")
        line = next(line for line in frame["types"] if line["type"] == "refreshLinks")
        if None not in (line["in_per_min"], line["out_per_min"]) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # Then the rates in and out are there, per minute over 5 minutes, and the pickup delays
    assert (line["in_per_min"], line["out_per_min"], line["failed_per_min"]) == (4.0, 4.0, None), frame
    assert line["pickup_p50_ms"] is not None and 0 <= line["pickup_p50_ms"] <= line["pickup_p95_ms"], frame
    assert frame["notes"] == []
    # And `jobkit queues` has the queue's oldest message age: none left
    # (a row per lane: refreshLinks has a high lane, a row of its own with "priority": "high")
    queues = {q["queue"]: q for q in jobkit_json(endpoint, "queues")["queues"] if q["priority"] is None}
    assert queues["refreshLinks"]["oldest_age_s"] == 0.0
    # And the local stack printed a line per job, and none per request
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    assert_only_jobkit_lines(lines.rest())


def test_a_port_in_use_is_an_error_at_once(test_declaration: Declaration) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = f"port {port} on 127.0.0.1 is in use: stop the other process or pass --port"
        # serve() raises a jobkit error at once, before it prints anything
        printed: list[str] = []
        raised: list[BaseException] = []
        stop = threading.Event()
        stop.set()  # were it to start, it would stop at once

        def run() -> None:
            try:
                serve(test_declaration, port=port, emit=printed.append, stop=stop)
            except BaseException as exc:
                raised.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(timeout=10)
        assert not thread.is_alive(), "serve() hangs on a port in use"
        [error] = raised
        assert isinstance(error, PortInUse) and isinstance(error, JobKitError)
        assert str(error) == message and (error.host, error.port) == ("127.0.0.1", port)
        assert printed == []
        # and `jobkit local up` exits with it, promptly, instead of hanging
        done = subprocess.run(
            [sys.executable, "-m", "jobkit.cli", "local", "up", "--port", str(port)],
            env={**os.environ, "JOBKIT_CONFIG": str(ROOT / "infra" / "jobs.toml")},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0 and done.stdout == ""
    assert message in done.stderr.strip().splitlines()[-1]


def test_the_endpoint_alone_reaches_the_local_stack(local_up: tuple[subprocess.Popen[str], Lines]) -> None:
    process, lines = local_up
    endpoint = printed(lines, "AWS_ENDPOINT_URL")
    # Given an operator's shell with none of the banner's variables but the
    # declaration, and (for the second command) another region exported
    bare = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    bare.update(AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
    bare["JOBKIT_CONFIG"] = str(ROOT / "infra" / "jobs.toml")
    for extra in ({}, {"AWS_REGION": "eu-west-1"}):
        done = subprocess.run(
            [sys.executable, "-m", "jobkit.cli", "queues", "--endpoint-url", endpoint, "--json"],
            env={**bare, **extra},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        # Then the command takes the stack's region and credentials, and finds its queues
        assert done.returncode == 0, done.stderr
        assert "refreshLinks" in {q["queue"] for q in json.loads(done.stdout)["queues"]}
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0


def test_an_endpoint_that_is_not_the_local_stack_changes_nothing() -> None:
    from jobkit.ops.local_endpoint import identify

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert identify(f"http://127.0.0.1:{port}", timeout_s=1.0) is None  # nothing listens
    assert identify("not a url") is None


CHATTY = """
[jobkit]
prefix = "chat"
code_dir = "{code_dir}"

[types.chatty]
class = "testjobs:ChattyJob"

[types.quiet]
class = "testjobs:ChattyJob"
log_level = "warning"
"""


@pytest.mark.parametrize("level", [None, "warning"])
def test_a_jobs_own_log_lines_are_printed_after_its_type_and_id(tmp_path: Path, level: str | None) -> None:
    from jobkit import JobSpecification
    from jobkit.declaration.config import load_declaration
    from jobkit.wiring import AwsClients, Wiring

    config = tmp_path / "jobs.toml"
    config.write_text(CHATTY.format(code_dir=(ROOT / "tests" / "fixtures").as_posix()))
    args = ["--config", str(config)] + (["--job-log-level", level] if level else [])
    with local_up_process(*args) as (process, lines):
        endpoint = printed(lines, "AWS_ENDPOINT_URL")
        credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        clients = AwsClients(region="us-east-1", endpoint_url=endpoint, credentials=credentials)
        group = Wiring(load_declaration(config), clients=clients).group()
        chatty, quiet = JobSpecification("chatty", {"n": 1}), JobSpecification("quiet", {"n": 2})
        group.push([chatty, quiet])
        lines.wait_for(f"succeeded chatty {chatty.id}")
        lines.wait_for(f"succeeded quiet {quiet.id}")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        text = "".join(lines.rest())
        assert_only_jobkit_lines(text.splitlines())
    info = f"log chatty {chatty.id}: INFO testjobs.chatty: chatty job at work on 1"
    assert f"log chatty {chatty.id}: WARNING testjobs.chatty: chatty job warns about 1" in text
    assert (info in text) is (level is None)
    assert f"log quiet {quiet.id}: WARNING testjobs.chatty: chatty job warns about 2" in text
    assert f"log quiet {quiet.id}: INFO" not in text  # its type's log_level is warning
    assert "botocore" not in text and "jobkit.runner" not in text


def test_advancing_the_clock_runs_a_two_hour_delay_now(local_up: tuple[subprocess.Popen[str], Lines]) -> None:
    from jobkit import JobSpecification
    from jobkit.declaration.config import load_declaration
    from jobkit.wiring import AwsClients, Wiring

    process, lines = local_up
    endpoint = printed(lines, "AWS_ENDPOINT_URL")
    credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    clients = AwsClients(region="us-east-1", endpoint_url=endpoint, credentials=credentials)
    group = Wiring(load_declaration(ROOT / "infra" / "jobs.toml"), clients=clients).group()
    # Given a job delayed two hours, and one due now
    later = JobSpecification("refreshLinks", {"title": "Later"}, delay=7200)
    now = JobSpecification("refreshLinks", {"title": "Now"})
    group.push([later, now])
    lines.wait_for(f"succeeded refreshLinks {now.id}")
    # When the developer moves the local stack's clock two hours on
    moved = subprocess.run(
        [sys.executable, "-m", "jobkit.cli", "local", "advance", "2h", "--endpoint-url", endpoint],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert moved.returncode == 0, moved.stderr
    assert "moved 2h (7200 s) forward" in moved.stdout
    # Then the delayed job runs at once, its release passed
    assert "succeeded" in lines.wait_for(f"refreshLinks {later.id}", timeout=30)
    # And the ops commands read the stack's clock, two hours ahead of the wall clock
    assert jobkit_json(endpoint, "top", "--once")["at"] > time.time() + 7000
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    assert_only_jobkit_lines(lines.rest())


def test_advance_says_what_is_wrong() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    for args, status, message in (
        (["2h", "--endpoint-url", f"http://127.0.0.1:{port}"], 1, "is not a jobkit local up"),
        (["2 weeks"], 2, "is not a duration"),
        (["0s"], 2, "more than 0 and at most 30 days"),
        (["31d"], 2, "more than 0 and at most 30 days"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "jobkit.cli", "local", "advance", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == status and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_durations_read_as_people_write_them() -> None:
    from jobkit.ops.local_endpoint import parse_duration

    assert [parse_duration(t) for t in ("90", "90s", "15m", "2h", "1d", "1h30m", "1.5h")] == [
        90,
        90,
        900,
        7200,
        86_400,
        5400,
        5400,
    ]


@pytest.mark.parametrize("answer", ["nested", "trickle", "null region", "redirect"])
def test_a_hostile_endpoint_is_not_taken_for_the_local_stack(answer: str) -> None:
    import http.server

    from jobkit.ops.local_endpoint import identify

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if answer == "redirect":
                self.send_response(302)
                self.send_header("Location", "http://127.0.0.1:9/jobkit/local")
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            if answer == "trickle":  # a byte a second: never a whole answer in time
                for _ in range(5):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(1)
                return
            fields = '"service": "jobkit local stack", "access_key_id": "a", "secret_access_key": "b"'
            body = "[" * 4096 if answer == "nested" else '{"region": null, ' + fields + "}"
            self.wfile.write(body.encode())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.handle_error = lambda *args: None  # type: ignore[method-assign]  # the prober hung up: as meant
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        assert identify(f"http://127.0.0.1:{server.server_address[1]}", timeout_s=1.0) is None
        assert time.monotonic() - started < 1.5
    finally:
        server.shutdown()


SLEEPY = """
[jobkit]
prefix = "sleepy"
code_dir = "."

[types.sleepy]
class = "sleepy_jobs:SleepyJob"
timeout_s = 10

[push_endpoint]
types = ["sleepy"]
auth = "hmac"
hmac_secret = "sleepy/push"
"""

SLEEPY_JOBS = """
import time

from jobkit import Job


class SleepyJob(Job):
    def run(self) -> bool:
        time.sleep(self.params["s"])
        return True
"""


def test_an_advance_waits_for_the_running_job_and_signatures_keep_the_wall_clock(tmp_path: Path) -> None:
    import urllib.request

    from jobkit import JobSpecification
    from jobkit.declaration.config import load_declaration
    from jobkit.endpoint.signature import HEADER, sign
    from jobkit.local.push_route import LOCAL_HMAC_KEY
    from jobkit.wiring import AwsClients, Wiring

    (tmp_path / "sleepy_jobs.py").write_text(SLEEPY_JOBS)
    config = tmp_path / "jobs.toml"
    config.write_text(SLEEPY)
    with local_up_process("--config", str(config)) as (process, lines):
        endpoint = printed(lines, "AWS_ENDPOINT_URL")
        push_url = printed(lines, "JOBKIT_PUSH_URL")
        credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        clients = AwsClients(region="us-east-1", endpoint_url=endpoint, credentials=credentials)
        group = Wiring(load_declaration(config), clients=clients).group()
        # Given a job that takes 3 s, running
        slow = JobSpecification("sleepy", {"s": 3})
        group.push(slow)
        time.sleep(1.0)
        # When the clock is moved an hour on while it runs
        moved = subprocess.run(
            [sys.executable, "-m", "jobkit.cli", "local", "advance", "1h", "--endpoint-url", endpoint],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert moved.returncode == 0, moved.stderr
        # Then the job ran once, in its own time: the advance waited for it
        line = lines.wait_for(slow.id)
        assert "succeeded" in line and "(attempt 1" in line
        assert int(line.rsplit(" in ", 1)[1].split()[0]) < 10_000  # ms: not the hour
        # And a producer's HMAC signature, made with its own (wall) clock, is still taken
        body = json.dumps({"jobs": [{"type": "sleepy", "params": {"s": 0}}]}).encode()
        request = urllib.request.Request(push_url, data=body, method="POST")
        request.add_header("content-type", "application/json")
        request.add_header(HEADER, sign(LOCAL_HMAC_KEY, body, time.time()))
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
        time.sleep(2)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        text = "".join(lines.rest())
    assert text.count(slow.id) == 1, text  # never a second attempt
