"""What ``jobkit verify`` costs and how long it takes, on the example stack
deployed from its template (``jobkit local up --template``'s stack, in this
process, its runners polling in a thread on the real clock).

Counted at the botocore level, split by who made the request: verify itself
(the operator's side: its sends, polls of the jobs table, DLQ scans, the
wiring reads and the clean-up) and the runners (the event source mapping's
receives and deletes, the canaries' re-sends, their records).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from _common import ROOT, ApiCalls, aws_environment

TEMPLATE = ROOT / "template.yaml"
CONFIG = ROOT / "infra" / "jobs.toml"


def run(timeout_s: float = 90.0, dead_letter: bool = True) -> dict[str, Any]:
    from click.testing import CliRunner

    from jobkit.cli import main
    from jobkit.declaration.config import load_declaration
    from jobkit.local import LocalStack

    declaration = load_declaration(CONFIG)
    calls = ApiCalls()
    stop = threading.Event()
    with aws_environment(None), LocalStack(declaration, server=True, port=0, template=TEMPLATE) as stack:

        def runners() -> None:
            while not stop.is_set():
                if not stack.poll_once():
                    stop.wait(0.05)

        thread = threading.Thread(target=runners, name="runners", daemon=True)
        with calls.counting():
            thread.start()
            began = time.perf_counter()
            args = ["verify", "--json", "--timeout", str(timeout_s), "--endpoint-url", stack.endpoint_url]
            result = CliRunner().invoke(
                main, [*args, *([] if dead_letter else ["--no-dead-letter"])], env={"JOBKIT_CONFIG": str(CONFIG)}
            )
            seconds = time.perf_counter() - began
            stop.set()
            thread.join()
        invocations = sum(m.invocations for m in stack.mappings.values())
    queues = len(declaration.queues)
    mine = {name: n for (thread_name, name), n in calls.by_thread.items() if thread_name != "runners"}
    theirs = {name: n for (thread_name, name), n in calls.by_thread.items() if thread_name == "runners"}

    def per_queue(counts: dict[str, int], service: str) -> float:
        return round(sum(n for name, n in counts.items() if name.startswith(service)) / queues, 1)

    return {
        "exit_status": result.exit_code,
        "queues": queues,
        "seconds": round(seconds, 1),
        "verify_requests_per_queue": {s: per_queue(mine, s) for s in ("sqs.", "dynamodb.", "lambda.", "cloudwatch.")},
        "runner_requests_per_queue": {s: per_queue(theirs, s) for s in ("sqs.", "dynamodb.")},
        "invocations_per_queue": round(invocations / queues, 1),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
