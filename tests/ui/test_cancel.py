"""Cancelling from `jobkit ui`: a job from its page, every job of a type pushed
until now from the type's, and a redrive that keeps cancelled jobs cancelled
unless it lifts them; behind --allow-actions, the form token and the
confirmation, as the other actions. Through the app's HTTP routes (Starlette's
TestClient), on the in-process local stack, with a declaration of its own: a
cancellable type that tracks its status, one that does not, and one that is
not cancellable. Each form is submitted as the page renders it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.local.results import PUBLISH_INTERVAL_S
from jobkit.records.keys import JobRef
from jobkit.ui.settings import UiSettings

from .client import CSRF, Ui, form, forms
from conftest import START
from testjobs import BROKEN, RUNS

DECLARATION = """
[jobkit]
prefix = "uicancel"
namespace = "jobkit-uicancel"

[types.report]
# Fails while params["page"] is in testjobs.BROKEN; one attempt; tracks its status.
class = "testjobs:BuggyJob"
cancellable = true
track_status = true
max_attempts = 1

[types.mail]
# Cancellable, without a status.
class = "testjobs:BuggyJob"
cancellable = true
max_attempts = 1

[types.plain]
# Not cancellable.
class = "testjobs:BuggyJob"
track_status = true
max_attempts = 1
"""


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture
def stack(jobs_toml: Path) -> Iterator[LocalStack]:
    """This file's types, on a local stack of their own (the shared fixture's, overridden)."""
    with LocalStack(load_declaration(jobs_toml), clock=VirtualClock(START), seed=5) as local:
        RUNS.clear()
        BROKEN.clear()
        yield local
        BROKEN.clear()


@pytest.fixture
def read_only(stack: LocalStack, jobs_toml: Path) -> Ui:
    return Ui(stack, UiSettings(), config_path=jobs_toml)


@pytest.fixture
def actions(stack: LocalStack, jobs_toml: Path) -> Ui:
    return Ui(stack, UiSettings(allow_actions=True), config_path=jobs_toml)


def ended(stack: LocalStack) -> dict[tuple[str | None, str], Outcome]:
    """Each job that ended: (domain, job ID) to its outcome."""
    return {(r.domain, r.job_id or ""): r.outcome for r in stack.results.results if r.outcome.is_final}


def cancellations(stack: LocalStack) -> list[str]:
    """The keys of the cancellation records in the jobs table."""
    items = stack.dynamodb.scan(TableName=stack.declaration.table_name)["Items"]
    return [item["pk"]["S"] for item in items if "#cancel#" in item["pk"]["S"]]


def confirm(ui: Ui, asked: str, action: str) -> str:
    """Say yes on a confirmation page: post its form as it is."""
    [(url, hidden, _)] = forms(asked, action)
    assert hidden["confirm"] == "yes"
    answer = ui.post(url, hidden)
    assert answer.status_code == 200, answer.text
    return str(answer.text)


# -- off without --allow-actions -----------------------------------------------------------------


def test_with_actions_off_there_is_no_cancel_button_and_a_cancel_post_is_refused(
    read_only: Ui, stack: LocalStack
) -> None:
    stack.queue_group("wiki").push(JobSpecification("report", {"page": "A"}, id="r1"))
    for url in ("/types/report", "/types/report/job?id=r1"):
        page = read_only.get(url).text
        assert not forms(page, "/cancel") and not forms(page, "/cancel-all")
        assert ">Cancel" not in page and "/cancel" not in page
    # even a well-formed, confirmed POST with the right token
    for action in ("cancel", "cancel-all"):
        refused = read_only.post(f"/types/report/{action}", form(id="r1", domain="wiki", confirm="yes"))
        assert refused.status_code == 403 and "--allow-actions" in refused.text
    assert cancellations(stack) == []
    stack.drain()
    assert ended(stack) == {("wiki", "r1"): Outcome.SUCCEEDED}


# -- one job, from its page ----------------------------------------------------------------------


def test_a_queued_job_cancelled_from_its_page_asks_first_then_never_runs(actions: Ui, stack: LocalStack) -> None:
    group = stack.queue_group("wiki")
    group.push([JobSpecification("report", {"page": "A"}, id="r1"), JobSpecification("report", {"page": "B"}, id="r2")])
    # A queued job has no records yet: its page says so, and asks for its domain
    page = actions.get("/types/report/job", params={"id": "r1"})
    assert page.status_code == 404 and "or it is still queued" in page.text
    [(url, hidden, typed)] = forms(page.text, "/cancel")
    assert (url, hidden, typed) == ("/types/report/cancel", {"csrf": CSRF, "id": "r1"}, ["domain"])
    # Asked: nothing is cancelled yet
    asked = actions.post(url, {**hidden, "domain": "wiki"})
    assert asked.status_code == 200
    assert "Cancel report job <strong>r1</strong> in domain &#39;wiki&#39;?" in asked.text
    assert stack.records.cancellations.of_job(JobRef("report", "wiki", "r1")) is None
    # Confirmed: cancelled, signed by the operator from the web view
    done = confirm(actions, asked.text, "/cancel")
    assert 'class="moved cancelled"' in done and "(web view)" in done
    cancellation = stack.records.cancellations.of_job(JobRef("report", "wiki", "r1"))
    assert (
        cancellation is not None and cancellation.by.startswith("operator ") and cancellation.by.endswith(" (web view)")
    )
    stack.drain()
    assert ended(stack) == {("wiki", "r1"): Outcome.CANCELLED, ("wiki", "r2"): Outcome.SUCCEEDED}
    assert ("report", "r1", "run") not in RUNS
    # Its page shows it cancelled, and knows its domain now
    job = actions.get("/types/report/job", params={"id": "r1"}).text
    assert '<dd class="state cancelled">cancelled</dd>' in job and "cancelled by operator " in job
    [(_, hidden, typed)] = forms(job, "/cancel")
    assert hidden["domain"] == "wiki" and typed == []


def test_a_job_that_had_ended_is_cancelled_anyway_and_its_page_says_it_had_started(
    actions: Ui, stack: LocalStack
) -> None:
    stack.queue_group().push(JobSpecification("report", {"page": "A"}, id="ran"))
    stack.drain()
    page = actions.get("/types/report/job", params={"id": "ran"}).text
    assert '<dd class="state succeeded">succeeded</dd>' in page and "<dt>cancellation</dt>" not in page
    [(url, hidden, typed)] = forms(page, "/cancel")
    assert "domain" not in hidden and typed == []  # known, without a domain
    done = actions.post(url, {**hidden, "confirm": "yes"}).text
    assert "its records say it had ended already" in done and 'class="moved had-ended"' in done
    page = actions.get("/types/report/job", params={"id": "ran"}).text
    assert '<dd class="state succeeded">succeeded</dd>' in page
    line = re.search(r'<dt>cancellation</dt><dd class="cancellation">(.*?)</dd>', page)
    assert line is not None, page
    assert re.fullmatch(
        r"recorded by operator \S+ \(web view\) at 2027-01-15 08:00:\d\d UTC, but the job had already started",
        line.group(1),
    )


def test_a_job_is_cancelled_by_its_id_from_its_types_page(actions: Ui, stack: LocalStack) -> None:
    stack.queue_group().push(JobSpecification("mail", {"page": "A"}, id="m1"))
    [(url, hidden, typed)] = forms(actions.get("/types/mail").text, "/cancel")
    assert typed == ["id", "domain"]
    asked = actions.post(url, {**hidden, "id": "m1", "domain": ""})
    assert "Cancel mail job <strong>m1</strong> without a domain?" in asked.text
    done = confirm(actions, asked.text, "/cancel")
    assert 'class="moved cancelled"' in done  # mail keeps no status: nothing says it ended
    stack.drain()
    assert ended(stack) == {(None, "m1"): Outcome.CANCELLED}


# -- every job pushed until now, from the type's page --------------------------------------------


def test_cancel_all_cancels_the_jobs_pushed_until_the_question_and_spares_those_pushed_after(
    actions: Ui, stack: LocalStack
) -> None:
    wiki = stack.queue_group("wiki")
    wiki.push(JobSpecification("report", {"page": "A"}, id="old"))
    stack.queue_group().push(JobSpecification("report", {"page": "A"}, id="old"))  # no domain: another job
    page = actions.get("/types/report").text
    [(url, hidden, typed)] = forms(page, "/cancel-all")
    assert ">Cancel all jobs pushed until now<" in page and typed == ["domain"]
    asked = actions.post(url, {**hidden, "domain": "wiki"})
    assert "Cancel every report job in domain &#39;wiki&#39; pushed until <strong>2027-01-15 08:00:" in asked.text
    assert cancellations(stack) == []
    # A job pushed while the question is on screen is not one the operator saw
    wiki.push(JobSpecification("report", {"page": "A"}, id="new"))
    done = confirm(actions, asked.text, "/cancel-all")
    assert "Cancelled every report job in domain &#39;wiki&#39; pushed until" in done
    stack.drain()
    assert ended(stack) == {
        ("wiki", "old"): Outcome.CANCELLED,
        (None, "old"): Outcome.SUCCEEDED,
        ("wiki", "new"): Outcome.SUCCEEDED,
    }


# -- the guards ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "headers", "why"),
    [
        ({}, {}, "token is missing or wrong"),
        ({"csrf": "guessed"}, {}, "token is missing or wrong"),
        ({"csrf": CSRF}, {"origin": "http://evil.example"}, "another origin"),
        ({"csrf": CSRF}, {"sec-fetch-site": "cross-site"}, "another site"),
    ],
)
def test_a_cancel_without_the_form_token_or_from_another_site_is_refused(
    actions: Ui, stack: LocalStack, fields: dict[str, str], headers: dict[str, str], why: str
) -> None:
    stack.queue_group().push(JobSpecification("report", {"page": "A"}, id="r1"))
    for action in ("cancel", "cancel-all"):
        refused = actions.post(f"/types/report/{action}", {"id": "r1", "confirm": "yes", **fields}, headers=headers)
        assert refused.status_code == 403 and why in refused.text
    assert cancellations(stack) == []
    stack.drain()
    assert ended(stack) == {(None, "r1"): Outcome.SUCCEEDED}


def test_a_type_that_is_not_cancellable_has_no_cancel_button_and_a_forged_post_gets_a_clear_error(
    actions: Ui, stack: LocalStack
) -> None:
    stack.queue_group().push(JobSpecification("plain", {"page": "A"}, id="p1"))
    stack.drain()
    for url in ("/types/plain", "/types/plain/job?id=p1"):
        page = actions.get(url)
        assert page.status_code == 200
        assert not forms(page.text, "/cancel") and not forms(page.text, "/cancel-all")
        assert ">Cancel" not in page.text
    assert "<dt>cancellation</dt><dd>not cancellable</dd>" in actions.get("/types/plain").text
    for action, label in (("cancel", "Cancel"), ("cancel-all", "Cancel all")):
        for confirmed in ("", "yes"):  # refused before it asks, and when forged as confirmed
            refused = actions.post(f"/types/plain/{action}", form(id="p1", confirm=confirmed))
            assert refused.status_code == 400
            assert f"<h1>{label}: not done</h1>" in refused.text
            assert "plain: its jobs cannot be cancelled: declare cancellable = true in [types.plain]" in refused.text
    assert cancellations(stack) == []


@pytest.mark.parametrize(
    ("url", "fields", "status", "message"),
    [
        ("/types/nope/cancel", {"id": "x"}, 404, "nope"),
        ("/types/report/cancel", {"id": "has#hash"}, 400, "a job ID must match"),
        ("/types/report/cancel", {}, 400, "which job?"),
        ("/types/report/cancel-all", {"before": "yesterday"}, 400, "give epoch seconds or an ISO 8601 time"),
        ("/types/report/cancel-all", {"before": str(START + 3_600)}, 400, "s in the future: a watermark cancels"),
    ],
)
def test_what_a_cancel_cannot_do_is_a_page_that_says_so(
    actions: Ui, stack: LocalStack, url: str, fields: dict[str, str], status: int, message: str
) -> None:
    refused = actions.post(url, form(confirm="yes", **fields))
    assert refused.status_code == status and message in refused.text and ": not done</h1>" in refused.text
    assert cancellations(stack) == []


def test_with_the_jobs_table_unavailable_a_cancel_says_nothing_was_done(actions: Ui, stack: LocalStack) -> None:
    stack.queue_group().push(JobSpecification("mail", {"page": "A"}, id="m1"))
    stack.dynamodb.delete_table(TableName=stack.declaration.table_name)
    for action in ("cancel", "cancel-all"):
        refused = actions.post(f"/types/mail/{action}", form(id="m1", confirm="yes"))
        assert refused.status_code == 503, refused.text
        assert "the jobs table could not answer, so nothing was done" in refused.text


# -- a redrive -----------------------------------------------------------------------------------


@pytest.mark.parametrize("uncancel", [False, True])
def test_a_redrive_keeps_a_cancelled_job_cancelled_unless_its_form_lifts_it(
    actions: Ui, stack: LocalStack, uncancel: bool
) -> None:
    BROKEN.add("A")
    stack.queue_group().push(JobSpecification("report", {"page": "A"}, id="dead"))
    stack.drain()
    assert stack.queue_depth("report", dlq=True) == 1
    stack.clock.advance(1)
    # Cancelled in the DLQ: its status says it failed for good
    job = actions.get("/types/report/job", params={"id": "dead"}).text
    [(url, hidden, _)] = forms(job, "/cancel")
    assert "its records say it had ended already" in actions.post(url, {**hidden, "confirm": "yes"}).text
    # The fix is deployed, and the operator redrives every dead letter
    BROKEN.clear()
    page = actions.get("/types/report").text
    [(url, hidden, typed)] = [f for f in forms(page, "/redrive") if f[1].get("mode") == "all"]
    assert typed == ["uncancel"]
    ticked = {"uncancel": "yes"} if uncancel else {}
    asked = actions.post(url, {**hidden, **ticked})
    assert "A cancelled job among them stays cancelled" in asked.text
    # the question asks again, ticked as the form was
    [(url, hidden, typed)] = forms(asked.text, "/redrive")
    assert "uncancel" not in hidden and typed == ["uncancel"]
    assert ('name="uncancel" value="yes" checked>' in asked.text) is uncancel
    moved = actions.post(url, {**hidden, **ticked}).text
    assert 'class="moved-count">1<' in moved
    assert ('class="note lifted"' in moved) is uncancel
    assert stack.queue_depth("report", dlq=True) == 0
    stack.results.clear()
    stack.drain()
    assert ended(stack) == {(None, "dead"): Outcome.SUCCEEDED if uncancel else Outcome.CANCELLED}


# -- what the overview counts --------------------------------------------------------------------


def test_cancelled_jobs_count_in_the_jobs_out_of_the_overview(jobs_toml: Path) -> None:
    with LocalStack(load_declaration(jobs_toml), clock=VirtualClock(START), seed=5, publish_metrics=True) as local:
        ui = Ui(local, UiSettings(allow_actions=True), config_path=jobs_toml)
        local.queue_group().push([JobSpecification("mail", {"page": "A"}, id=f"m{n}") for n in range(4)])
        [(url, hidden, _)] = forms(ui.get("/types/mail").text, "/cancel-all")
        confirm(ui, ui.post(url, hidden).text, "/cancel-all")
        local.drain()
        assert local.results.outcomes("mail") == {Outcome.CANCELLED: 4}
        local.clock.advance(PUBLISH_INTERVAL_S)
        local.poll_once()
        page = ui.get("/").text
    rows = dict(re.findall(r'<tr class="[^"]*" data-type="(\w+)">(.*?)</tr>', page, re.S))
    _oldest, _in, out, failed, *_ = re.findall(r'<td class="n">([^<]*)</td>', rows["mail"])
    assert (out, failed) == ("0.8", "-")  # 4 jobs ended in 5 minutes, all cancelled; none failed
    header = re.search(r'<th class="n" title="([^"]*)">out/min</th>', page)
    assert header is not None and "Cancelled" in header.group(1).split(": ", 1)[1].split(", ")
