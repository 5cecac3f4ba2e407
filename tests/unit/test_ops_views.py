"""The ops library without AWS: scopes, dead-letter parsing, hostile bodies,
verdicts from records and claims from attributes, selection, redriven
attributes, the worst line of ``top`` and how figures read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.console import Console, RenderableType

from jobkit.core.errors import JobKitError
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.ops import JobMatch, JobReport, QueuesReport, QueueSummary, TopSnapshot, TypeLine, resolve_scope
from jobkit.ops.bodies import safe_text
from jobkit.ops.dead_letters import DeadLetterListing, dead_letter, judged
from jobkit.ops.verdict import Claimed, from_runs
from jobkit.ops.views import (
    dead_letter_detail,
    dead_letters_table,
    duration,
    job_view,
    queues_table,
    top_table,
)
from jobkit.records import FailureRecord, FinalAttempt, JobRuns, TableUnavailable
from jobkit.records.keys import JobRef
from jobkit.records.memory import MemoryRecords
from jobkit.sqs import sendable_attributes
from jobkit.status.tracker import JobState, JobStatus


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


def test_a_dead_letter_reads_what_it_can_and_trusts_none_of_its_attributes(declaration: Declaration) -> None:
    spec = JobSpecification("own", {"page": "A"}, domain="enwiki").stamped(990.0)
    claims = {"jobkit.error": "Parser crashed", "jobkit.errorClass": "RuntimeError", "jobkit.reason": "poison"}
    runner_copy = dead_letter(message(spec.to_message(), JobType="rare", **claims))
    assert (runner_copy.job_id, runner_copy.job_type, runner_copy.domain) == (spec.id, "own", "enwiki")
    assert runner_copy.claimed_type == "rare"  # the attribute says otherwise: shown, not believed
    # Until the jobs table is read, nothing is known: the attributes are claims only
    assert (runner_copy.reason, runner_copy.verified, runner_copy.last_error) == ("unknown", False, None)
    assert runner_copy.claimed is not None and runner_copy.claimed.summary == "poison: RuntimeError: Parser crashed"
    assert not runner_copy.error_matches("parser")
    assert runner_copy.age_s(1010.5) == 10.0  # since sent: no dead-letter record
    # A body that is not a job: readable as JSON, but no job ID, no type; poison by the tool's own parse
    wrong = dead_letter(message(json.dumps({"v": 1, "id": "j-9", "type": "own"})))
    assert (wrong.job_id, wrong.job_type, wrong.spec, wrong.data["id"]) == (None, None, None, "j-9")
    assert wrong.parse_error is not None and "missing required field" in wrong.parse_error
    assert (wrong.reason, wrong.verified, wrong.error_class) == ("poison", True, "SpecError")
    assert wrong.error_matches("MISSING required")


def test_the_jobs_table_gives_the_reason(declaration: Declaration) -> None:
    records = MemoryRecords()
    scope = resolve_scope(declaration, "own")
    spec = JobSpecification("own", {"page": "A"}, domain="enwiki").stamped(1000.0)
    records.put_failure(failure(spec, 1, 1001.0, dead_letter_reason="non_retryable"), 2**31)
    dead = judged(dead_letter(message(spec.to_message(), **{"jobkit.reason": "poison"})), scope, records, now=2000.0)
    assert (dead.reason, dead.verified, dead.attempts, dead.dead_lettered_at) == ("non_retryable", True, 1, 1001.0)
    assert dead.last_error == "RuntimeError: failed on 1" and dead.source_queue == "prod-own"
    assert dead.error_matches("FAILED ON")
    # Without a table, or with one that cannot be read, the reason is unknown, and says why
    assert judged(dead_letter(message(spec.to_message())), scope, None, now=2000.0).reason == "unknown"

    class Unreadable(MemoryRecords):
        def runs(self, job_type: str, job_id: str, limit: int, domain: Any = None) -> dict[str | None, JobRuns]:
            raise TableUnavailable("AccessDenied")

    blind = judged(dead_letter(message(spec.to_message())), scope, Unreadable(), now=2000.0)
    assert (blind.reason, blind.verified) == ("unknown", False) and "AccessDenied" in blind.explanation


def failure(
    spec: JobSpecification, attempt: int, at: float, error_class: str = "RuntimeError", **fields: Any
) -> FailureRecord:
    return FailureRecord(
        spec.id, spec.type, spec.domain, attempt, at, error_class, f"failed on {attempt}", "", **fields
    )


def final(spec: JobSpecification, attempt: int, started_at: float, succeeded_at: float | None = None) -> FinalAttempt:
    return FinalAttempt(JobRef(spec.type, spec.domain, spec.id), attempt, "m-1", started_at, succeeded_at)


SPEC = JobSpecification("own", id="j-1").stamped(100.0)


@pytest.mark.parametrize(
    ("failures", "last", "expected"),
    [
        # the final attempt succeeded: only its delete was lost (an earlier failure is older)
        ([failure(SPEC, 2, 110.0)], final(SPEC, 3, 120.0, 121.0), ("succeeded_delete_lost", 3, None)),
        # the runner's dead-letter record
        (
            [failure(SPEC, 3, 130.0, dead_letter_reason="attempts_exhausted")],
            final(SPEC, 3, 120.0),
            ("attempts_exhausted", 3, "RuntimeError"),
        ),
        # the watchdog's record of the final attempt
        ([failure(SPEC, 3, 178.0, "JobTimedOut")], final(SPEC, 3, 120.0), ("timed_out", 3, "JobTimedOut")),
        # the final attempt started and never reported (an earlier attempt timed out)
        ([failure(SPEC, 2, 110.0, "JobTimedOut")], final(SPEC, 3, 120.0), ("no_attempt_finished", 3, None)),
        # failures without a dead-letter reason: SQS moved it
        ([failure(SPEC, 1, 101.0), failure(SPEC, 2, 111.0)], None, ("redrive_policy", 2, "RuntimeError")),
        # records of an earlier job with the same ID (before this one was enqueued) are not its own
        (
            [failure(SPEC, 1, 99.0, dead_letter_reason="non_retryable")],
            final(SPEC, 3, 50.0, 51.0),
            ("unknown", None, None),
        ),
        # a newer failure (after a redrive) outranks an older success
        ([failure(SPEC, 1, 200.0)], final(SPEC, 3, 120.0, 121.0), ("redrive_policy", 1, "RuntimeError")),
        ([], None, ("unknown", None, None)),
    ],
)
def test_the_newest_record_decides_the_reason(
    failures: list[FailureRecord], last: FinalAttempt | None, expected: tuple[str, int | None, str | None]
) -> None:
    runs = JobRuns(tuple(sorted(failures, key=lambda f: f.at, reverse=True)), last)
    verdict = from_runs(runs, 100.0)
    assert (verdict.reason, verdict.attempts, verdict.error_class) == expected
    assert verdict.verified is (verdict.reason != "unknown")


def test_hostile_bodies_are_read_without_raising() -> None:
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    for body in (deep, '{"x": "\\ud800"}', '{"x": 1e400}', '{"a": 1, "a": 2}', "\udc00 raw", ""):
        dead = dead_letter(message(body))
        assert dead.spec is None and dead.data is None and dead.reason == "poison"
        dead.body_start.encode("utf-8")
        json.dumps(dead.to_json(0.0, full=True), ensure_ascii=False, allow_nan=False).encode("utf-8")
    assert safe_text("a\ud800b") == "a?b"
    raw = dead_letter(message('{"x": "\ud800"}'))  # a raw lone surrogate: only a hand-made message has one
    assert raw.body_start == '{"x": "?"}'


def test_claims_are_read_as_text_and_numbers_only_when_plausible() -> None:
    claimed = Claimed.from_attributes({"jobkit.attempts": "9" * 400, "jobkit.deadLetteredAt": "9" * 400})
    assert claimed is not None and (claimed.attempts, claimed.dead_lettered_at) == (None, None)
    assert Claimed.from_attributes({"JobType": "own"}) is None
    ok = Claimed.from_attributes({"jobkit.attempts": "3", "jobkit.deadLetteredAt": "1000.5", "jobkit.error": "\ud800"})
    assert ok is not None and (ok.attempts, ok.dead_lettered_at, ok.error) == (3, 1000.5, "?")


def test_the_body_decides_the_type_and_a_message_id_selects_a_typeless_message(declaration: Declaration) -> None:
    rare, rarer, queue = (resolve_scope(declaration, name) for name in ("rare", "rarer", "lowTraffic"))
    job = dead_letter(message(JobSpecification("rare").stamped(1.0).to_message(), JobType="rarer"))
    junk = dead_letter(message("not a job", JobType="rare"))
    assert job.selected(rare) and not job.selected(rarer) and job.selected(queue)
    assert not job.selected(rarer, ["m-1"])  # a job of another type stays out of a type's scope
    assert not junk.selected(rare) and junk.selected(queue) and junk.selected(rare, ["m-1"])
    assert junk.selected(rarer, ["m-1"]) and not junk.selected(rare, ["other"])


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


def line(
    job_type: str,
    *,
    backlog: int = 0,
    p95: float | None = None,
    oldest: float | None = None,
    dead: int = 0,
    ready: int | None = None,
) -> TypeLine:
    return TypeLine(job_type, job_type, False, backlog, dead, oldest, None, None, None, None, p95, ready)


def test_the_worst_line_is_the_furthest_behind() -> None:
    snapshot = TopSnapshot(
        0.0, 300, [line("a", backlog=900, p95=2_000), line("b", backlog=5, oldest=45), line("c", p95=9_000)], []
    )
    assert snapshot.worst == "b"  # 45 s behind beats a 9 s p95 and a bigger backlog
    assert TopSnapshot(0.0, 300, [line("a", backlog=3), line("b", backlog=7)], []).worst == "b"
    assert TopSnapshot(0.0, 300, [line("a"), line("b")], []).worst is None  # all idle: nothing to point at


def test_a_dead_letter_comes_first_and_a_delayed_job_is_not_behind() -> None:
    delayed = line("delayed", backlog=1, ready=0, oldest=840)  # one job waiting out a two-hour delay
    dead = line("dead", dead=1, ready=0)
    slow = line("slow", backlog=40, ready=40, oldest=120)
    assert TopSnapshot(0.0, 300, [delayed, dead, slow], []).worst == "dead"
    assert TopSnapshot(0.0, 300, [delayed, slow], []).worst == "slow"
    assert TopSnapshot(0.0, 300, [delayed, line("idle")], []).worst is None
    assert delayed.lag_s == 0.0 and slow.lag_s == 120.0
    more_dead = line("more", dead=3, ready=0)
    assert TopSnapshot(0.0, 300, [dead, more_dead, slow], []).worst == "more"


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
    console = Console(record=True, width=250)
    console.print(dead_letters_table(listing, 1000.0))
    text = console.export_text()
    assert "KeyError: [/bold] [0]" in text and "claims (unverified)" in text


def test_views_of_an_unreadable_message_print(declaration: Declaration) -> None:
    dead = dead_letter(message('{"v": 1, "x": "\\ud800"}' + "[" * 5000, **{"jobkit.attempts": "9" * 40}))
    listing = DeadLetterListing(resolve_scope(declaration, "lowTraffic"), [dead], 1, False)
    console = Console(record=True, width=250)
    console.print(dead_letters_table(listing, 1000.0))
    console.print(dead_letter_detail(dead, 1000.0))
    text = console.export_text()
    assert "unreadable: message m-1" in text and "poison (verified)" in text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.25, "0.2s"), (45, "45s"), (200, "3m20s"), (7500, "2h05m"), (3 * 86400 + 4 * 3600, "3d04h")],
)
def test_durations_read_at_a_glance(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


#: Wider than anything printed to an 80-column terminal may be.
NARROW = 80

LONG_ERROR = (
    "RuntimeError: the parser crashed while expanding {{Infobox settlement}} on page"
    " Template:Infobox_settlement after 3 retries"
)


def render(width: int, *renderables: RenderableType) -> list[str]:
    console = Console(record=True, width=width)
    for renderable in renderables:
        console.print(renderable)
    return console.export_text().splitlines()


def cells(lines: list[str], first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    row = next(line for line in lines if line.startswith(f"│ {first} "))
    return [cell.strip() for cell in row.split("│")[1:-1]]


def column_widths(lines: list[str]) -> list[int]:
    """The width of each column of the first table, from its top border."""
    top = next(line for line in lines if line.startswith("┏"))
    return [len(part) for part in top.strip("┏┓").split("┳")]


@pytest.fixture
def wiki() -> Declaration:
    types = {
        "htmlCacheUpdate": {"class": "m:C"},
        "refreshLinks": {"class": "m:C", "queue": "lowTraffic"},
        "enotifNotify": {"class": "m:C", "queue": "lowTraffic"},
        "categoryMembershipChange": {"class": "m:C", "queue": "lowTraffic"},
    }
    return parse_declaration({"jobkit": {"prefix": "prod"}, "types": types}, source="jobs.toml")


def wiki_queues() -> QueuesReport:
    return QueuesReport(
        [
            QueueSummary("htmlCacheUpdate", "prod-htmlCacheUpdate", ("htmlCacheUpdate",), 12_345, 1_234, 56, 3, 7500.0),
            QueueSummary(
                "lowTraffic",
                "prod-lowTraffic",
                ("refreshLinks", "enotifNotify", "categoryMembershipChange"),
                7,
                0,
                0,
                1_234,
                None,
            ),
        ],
        "CloudWatch GetMetricData: AccessDenied: not authorized to perform cloudwatch:GetMetricData on any resource",
    )


def wiki_top() -> TopSnapshot:
    return TopSnapshot(
        1_800_000_000.0,
        300,
        [
            TypeLine(
                "htmlCacheUpdate", "htmlCacheUpdate", False, 12_345, 3, 7500.0, 1234.5, 987.25, 12.5, 1234.0, 12345.0
            ),
            TypeLine("categoryMembershipChange", "lowTraffic", True, 7, 1_234, 45.0, None, None, None, None, None),
        ],
        ["pickup delays unavailable: An error occurred (InvalidParameterCombination) when calling GetMetricData"],
    )


def test_queues_and_top_read_at_80_columns() -> None:
    queues, top = wiki_queues(), wiki_top()
    for view in (queues_table(queues), top_table(top)):
        wide = render(200, view)
        lines = render(NARROW, view)
        assert max(map(len, lines)) <= NARROW
        assert min(column_widths(lines)) >= 5  # no column crushed: "DLQ" and a space either side at least
        assert len(column_widths(lines)) < len(column_widths(wide))  # some left out, and said so
        assert any("not shown at this width: " in line for line in lines)
    queue_lines = render(NARROW, queues_table(queues))
    assert cells(queue_lines, "prod-htmlCacheUpdate")[:3] == ["prod-htmlCacheUpdate", "htmlCacheUpdate", "12,345"]
    assert cells(queue_lines, "prod-lowTraffic")[1:4] == ["refreshLinks, enotifNotify,", "7", "1,234"]
    assert any(line.split("│")[2].strip() == "categoryMembershipChange" for line in queue_lines if "│" in line)
    assert "not shown at this width: in flight, delayed (see --json)" in " ".join(queue_lines)
    top_lines = render(NARROW, top_table(top))
    assert cells(top_lines, "htmlCacheUpdate") == ["htmlCacheUpdate", "12,345", "12.5", "12,345 ms", "2h05m", "3"]
    # the type names stay whole, and so do the counts
    assert cells(top_lines, "categoryMembershipChange") == ["categoryMembershipChange", "7", "-", "-", "45s", "1,234"]
    assert "in, out, failed: per minute; p50, p95: pickup delay" in " ".join(top_lines)
    # and where everything fits, everything shows, with its full header
    assert cells(render(200, top_table(top)), "htmlCacheUpdate")[1:4] == ["htmlCacheUpdate", "12,345", "1,234.5"]
    assert "not shown" not in " ".join(render(200, top_table(top)))


def test_dead_letters_and_jobs_read_at_80_columns(wiki: Declaration) -> None:
    records = MemoryRecords()
    spec = JobSpecification("htmlCacheUpdate", {"page": "Template:Infobox_settlement"}, domain="enwiki").stamped(990.0)
    tb = f'Traceback (most recent call last):\n  File "/var/task/jobtypes/html_cache_update.py", line 42\n{LONG_ERROR}'
    for attempt in (1, 2, 3):
        reason = "attempts_exhausted" if attempt == 3 else None
        record = FailureRecord(
            spec.id, spec.type, "enwiki", attempt, 1000.0 + attempt, "RuntimeError", LONG_ERROR[14:], tb, reason
        )
        records.put_failure(record, 2**31)
    claims = {"jobkit.error": LONG_ERROR, "jobkit.reason": "attempts_exhausted", "jobkit.attempts": "3"}
    scope = resolve_scope(wiki, "htmlCacheUpdate")
    dead = judged(dead_letter(message(spec.to_message(), **claims)), scope, records, now=2000.0)
    junk = judged(dead_letter(message("{not json" + "x" * 300)), scope, records, now=2000.0)
    listing = DeadLetterListing(scope, [dead, junk], 2, False)
    lines = render(NARROW, dead_letters_table(listing, 2000.0))
    assert max(map(len, lines)) <= NARROW and min(column_widths(lines)) >= 5
    row = cells(lines, spec.id[:18])
    assert row[1:3] == ["htmlCacheUpdate", "attempts_exhausted"] and row[3] == "RuntimeError:"
    assert any(line.startswith(f"│ {spec.id[18:]} ") for line in lines)  # the ID folds onto a second line
    assert cells(lines, "unreadable:")[1:3] == ["-", "poison"]
    assert "not shown at this width: " in " ".join(lines)
    # One dead letter, and one job, in full
    status = JobStatus(spec.id, spec.type, "enwiki", JobState.FAILED, 3, 1003.0, 1002.0, 1003.0, error=LONG_ERROR)
    final = FinalAttempt(JobRef(spec.type, "enwiki", spec.id), 3, "m-1", 1002.0, None)
    runs = records.runs(spec.type, spec.id, 10)["enwiki"]
    report = JobReport(spec.id, [JobMatch(spec.id, spec.type, "enwiki", status, runs.failures, final)])
    for view in (dead_letter_detail(dead, 2000.0), job_view(report)):
        lines = render(NARROW, view)
        assert max(map(len, lines)) <= NARROW
        text = "\n".join(lines)
        assert "htmlCacheUpdate" in text and "attempts_exhausted" in text and spec.id in text
        assert "RuntimeError: the parser crashed while expanding {{Infobox" in text


@pytest.mark.parametrize("width", [30, 40, 60, 79, 100, 120, 160, 250])
def test_no_table_is_ever_wider_than_the_terminal(width: int) -> None:
    for view in (queues_table(wiki_queues()), top_table(wiki_top())):
        lines = render(width, view)
        assert max(map(len, lines)) <= width
        if width >= 60:  # counts stay whole down to 60 columns, and below while they can
            assert "12,345" in "\n".join(lines)
