"""``jobkit local up``: the local stack as a service for apps under development.

It serves the AWS API (moto) on a loopback port with the declared queues,
DLQs and table, runs the runners continuously in real time, and prints what
happens to each job: a startup banner, then one line per job outcome (with the
correlation ID of the request that pushed it), the lines the job's own code
logs (:class:`JobLinePrinter`: INFO and above unless told otherwise), and no
line per HTTP request.
Point an app's push SDK at it with ``AWS_ENDPOINT_URL``.

What SQS and the runners measure goes into the emulated CloudWatch every few
seconds, as on AWS, so ``jobkit top`` and ``jobkit queues`` pointed at the
same endpoint show rates, pickup delays and the oldest message's age.

A port in use is a :class:`~jobkit.local.server.PortInUse` (a
:class:`~jobkit.core.errors.JobKitError`) before anything is printed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import RecordResult
from jobkit.declaration.config import Declaration
from jobkit.local.server import PortInUse
from jobkit.local.stack import LocalStack
from jobkit.runner.log_level import running_job, running_level

IDLE_POLL_S = 0.1


class OutcomePrinter:
    """A metrics sink that prints one line per record result."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit

    def record(self, result: RecordResult) -> None:
        timing = f" in {result.run_time_ms:.0f} ms" if result.run_time_ms is not None else ""
        # an error of several lines stays under its job's line
        error = f": {result.error}".replace("\n", "\n" + " " * 14) if result.error else ""
        correlation = f", correlation {result.correlation_id}" if result.correlation_id else ""
        self._emit(
            f"{result.outcome.value:>13} {result.job_type} {result.job_id or result.message_id}"
            f" (attempt {result.attempt}{correlation}){timing}{error}"
        )

    def flush(self) -> None:
        """Printed as they come."""


#: Loggers whose lines are not the job's own, though logged while it runs:
#: jobkit's (each outcome has its line), the AWS SDK's and the emulator's.
NOT_THE_JOBS = ("jobkit", "botocore", "boto3", "urllib3", "s3transfer", "moto", "werkzeug")


class JobLinePrinter(logging.Handler):
    """Prints the lines a job's own code logs while it runs (``logging``, at
    ``level`` and above, and no less severe than its type's ``log_level``),
    each after the job's type and ID, as the outcome lines name them."""

    def __init__(self, emit: Callable[[str], None], level: int = logging.INFO) -> None:
        super().__init__(level)
        self._emit = emit
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        job = running_job()
        if job is None or record.levelno < running_level() or record.name.split(".")[0] in NOT_THE_JOBS:
            return
        job_type, job_id = job
        try:
            text = self.format(record)
        except Exception as exc:  # the job's own bad log call: one line, not a traceback
            text = f"{record.levelname} {record.name}: (a log line that could not be formatted: {exc!r})"
        for line in text.splitlines() or [""]:
            self._emit(f"{'log':>13} {job_type} {job_id}: {line}")


def serve(
    declaration: Declaration,
    *,
    host: str = "127.0.0.1",
    port: int = 4566,
    emit: Callable[[str], None] = print,
    stop: threading.Event | None = None,
    template: Path | None = None,
    job_log_level: int = logging.INFO,
) -> None:
    """Run until ``stop`` is set (or KeyboardInterrupt). With ``template``, the
    stack is deployed from that SAM template (:class:`LocalStack`).

    Raises:
        PortInUse: another process listens on ``port``.
    """
    stop = stop or threading.Event()
    printer = JobLinePrinter(emit, job_log_level)
    root = logging.getLogger()
    root.addHandler(printer)
    if root.level > job_log_level:
        root.setLevel(job_log_level)
    local = LocalStack(
        declaration,
        server=True,
        host=host,
        port=port,
        sinks=[OutcomePrinter(emit)],
        publish_metrics=True,
        template=template,
        clock=VirtualClock(flowing=True),  # real time, which `jobkit local advance` can move ahead
    )
    try:
        stack = local.start()
    except PortInUse as exc:
        raise PortInUse(exc.host, exc.port, "stop the other process or pass --port") from None
    try:
        emit(f"jobkit local stack up: {len(declaration.queues)} queues, table {declaration.table_name}")
        emit("point your app at it with:")
        emit(f"  export AWS_ENDPOINT_URL={stack.endpoint_url}")
        emit("  export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1")
        emit("  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing")
        emit(f"  export JOBKIT_CONFIG={Path(declaration.source).resolve()}")
        if stack.payload_bucket is not None:  # where push puts the params of a job too large for a message
            emit(f"  export JOBKIT_PAYLOAD_BUCKET={stack.payload_bucket}")
        if declaration.push_endpoint is not None:  # the HTTP push endpoint, for producers in any language
            from jobkit.local.push_route import PATH

            emit(f"  export JOBKIT_PUSH_URL={stack.endpoint_url}{PATH}")
        emit("running jobs; Ctrl-C stops")
        try:
            while not stop.is_set():
                with stack.batch_lock:  # `jobkit local advance` moves the clock between rounds
                    delivered = stack.poll_once()
                if not delivered:
                    stop.wait(IDLE_POLL_S)
        except KeyboardInterrupt:
            pass
        emit("stopping")
    finally:
        stack.stop()  # the server's thread has ended when this returns
        root.removeHandler(printer)
