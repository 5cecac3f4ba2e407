"""The ops library without AWS: scopes, dead-letter parsing and matching,
redriven attributes, the worst line of ``top`` and how figures read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.console import Console

from jobkit.config import Declaration, parse_declaration
from jobkit.errors import JobKitError
from jobkit.ops import TopSnapshot, TypeLine, resolve_scope
from jobkit.ops.dead_letters import DeadLetterListing, dead_letter
from jobkit.ops.views import dead_letters_table, duration, top_table
from jobkit.spec import JobSpecification
from jobkit.sqs import sendable_attributes


@pytest.fixture
def declaration() -> Declaration:
    types = {
        "own": {"class": "m:C"},
        "rare": {"class": "m:C", "queue": "lowTraffic"},
        "rarer": {"class": "m:C", "queue": "lowTraffic"},
    }
    return parse_declaration({"jobkit": {"prefix": "prod"}, "types": types}, source="jobs.toml")


def test_a_type_on_a_shared_queue_is_a_filter_and_anything_else_the_whole_dlq(declaration: Declaration) -> None:
    own, rare, queue = (resolve_scope(declaration, name) for name in ("own", "rare", "lowTraffic"))
    assert (own.dlq_name, own.type_filter, own.includes(None), own.includes("other")) == (
        "prod-own-dlq",
        None,
        True,
        True,
    )
    assert (rare.sqs_name, rare.type_filter) == ("prod-lowTraffic", "rare")
    assert rare.includes("rare") and not rare.includes("rarer") and not rare.includes(None)
    assert "shared with rarer" in rare.describe()
    assert queue.whole_queue and queue.includes("rarer") and "types rare, rarer" in queue.describe()
    with pytest.raises(JobKitError, match=r"'nope' is neither a job type nor a queue of jobs\.toml"):
        resolve_scope(declaration, "nope")


def message(body: str, **attributes: str) -> dict[str, Any]:
    return {
        "MessageId": "m-1",
        "ReceiptHandle": "r",
        "Body": body,
        "Attributes": {"SentTimestamp": "1000500"},
        "MessageAttributes": {name: {"DataType": "String", "StringValue": v} for name, v in attributes.items()},
    }


def test_a_dead_letter_reads_what_it_can() -> None:
    spec = JobSpecification("own", {"page": "A"}, domain="enwiki").stamped(990.0)
    runner_copy = dead_letter(
        message(spec.to_message(), **{"jobkit.error": "Parser crashed", "jobkit.errorClass": "RuntimeError"})
    )
    assert (runner_copy.job_id, runner_copy.domain, runner_copy.last_error) == (
        spec.id,
        "enwiki",
        "RuntimeError: Parser crashed",
    )
    assert runner_copy.matches([spec.id], "parser CRASHED") and runner_copy.matches(["m-1"])
    assert not runner_copy.matches(["other"]) and not runner_copy.matches(error_contains="timeout")
    assert runner_copy.age_s(1010.5) == 10.0  # since sent: no dead-letter time
    wrong = dead_letter(message(json.dumps({"v": 1, "id": "j-9", "type": "own"})))
    assert (wrong.job_id, wrong.job_type, wrong.spec) == ("j-9", "own", None)
    assert wrong.parse_error is not None and "missing required field" in wrong.parse_error
    assert wrong.needs_failure_lookup and not runner_copy.needs_failure_lookup


def test_a_redriven_message_keeps_its_attributes_but_not_the_reason() -> None:
    received = {
        "JobType": {"DataType": "String", "StringValue": "own", "StringListValues": [], "BinaryListValues": []},
        "traceId": {"DataType": "Number", "StringValue": "42", "StringListValues": [], "BinaryListValues": []},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01", "StringListValues": [], "BinaryListValues": []},
        "jobkit.reason": {"DataType": "String", "StringValue": "poison"},
        "jobkit.attempts": {"DataType": "Number", "StringValue": "3"},
    }
    assert sendable_attributes(received) == {
        "JobType": {"DataType": "String", "StringValue": "own"},
        "traceId": {"DataType": "Number", "StringValue": "42"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    }


def line(job_type: str, *, backlog: int = 0, p95: float | None = None, oldest: float | None = None) -> TypeLine:
    return TypeLine(job_type, job_type, False, backlog, 0, oldest, None, None, None, None, p95)


def test_the_worst_line_is_the_furthest_behind() -> None:
    snapshot = TopSnapshot(
        0.0, 300, [line("a", backlog=900, p95=2_000), line("b", backlog=5, oldest=45), line("c", p95=9_000)], []
    )
    assert snapshot.worst == "b"  # 45 s behind beats a 9 s p95 and a bigger backlog
    assert TopSnapshot(0.0, 300, [line("a", backlog=3), line("b", backlog=7)], []).worst == "b"
    assert TopSnapshot(0.0, 300, [line("a"), line("b")], []).worst is None  # all idle: nothing to point at


def test_the_worst_line_stands_out_and_missing_figures_are_dashes() -> None:
    snapshot = TopSnapshot(0.0, 300, [line("a", backlog=1), line("b", backlog=2, p95=1234.4)], ["rates unavailable"])
    table = top_table(snapshot)
    assert [row.style for row in table.rows] == [None, "bold red reverse"]
    console = Console(record=True, width=200)
    console.print(table)
    text = console.export_text()
    assert "1,234 ms" in text and "rates unavailable" in text
    row_a = next(row for row in text.splitlines() if row.startswith("│ a "))
    assert [cell.strip() for cell in row_a.split("│")[4:10]] == ["-"] * 6


def test_values_are_text_never_markup(declaration: Declaration) -> None:
    spec = JobSpecification("own", {"page": "A"}).stamped(990.0)
    dead = dead_letter(message(spec.to_message(), **{"jobkit.error": "KeyError: [/bold] [0]"}))
    listing = DeadLetterListing(resolve_scope(declaration, "own"), [dead], 1, False)
    console = Console(record=True, width=200)
    console.print(dead_letters_table(listing, 1000.0))
    assert "KeyError: [/bold] [0]" in console.export_text()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.25, "0.2s"), (45, "45s"), (200, "3m20s"), (7500, "2h05m"), (3 * 86400 + 4 * 3600, "3d04h")],
)
def test_durations_read_at_a_glance(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text
