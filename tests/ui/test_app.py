"""`jobkit ui`'s pages and guards, without a browser: Starlette's TestClient
against the app built from the CLI's own CliConfig, on the in-process local
stack (moto), with the stack's frozen clock.

moto makes a released message visible again only once the clock has moved
past the release, so the clock moves a second after each request that reads a DLQ.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from jobkit import JobSpecification
from jobkit.core.outcome import Outcome
from jobkit.local import LocalStack
from jobkit.ui.access import COOKIE
from jobkit.ui.headers import CONTENT_SECURITY_POLICY
from jobkit.ui.settings import UiSettings

from .client import CSRF, LOCAL, TOKEN, Ui, form
from testjobs import BROKEN


@pytest.fixture
def dead_job(stack: LocalStack) -> JobSpecification:
    """A buggy job, dead-lettered after its one attempt; the bug is still there."""
    BROKEN.add("Main Page")
    spec = JobSpecification("buggy", {"page": "Main Page", "error": "parser crashed", "email": "someone@example.org"})
    stack.queue_group().push(spec)
    stack.drain()
    assert stack.queue_depth("buggy", dlq=True) == 1
    stack.clock.advance(1)
    return spec


@pytest.fixture
def read_only(stack: LocalStack) -> Iterator[Ui]:
    yield Ui(stack, UiSettings())


@pytest.fixture
def actions(stack: LocalStack) -> Iterator[Ui]:
    yield Ui(stack, UiSettings(allow_actions=True))


# -- the pages ------------------------------------------------------------------------------------


def test_the_overview_has_a_row_per_type_with_its_counts(
    read_only: Ui, dead_job: JobSpecification, stack: LocalStack
) -> None:
    page = read_only.get("/").text
    rows = dict(re.findall(r'<tr class="[^"]*" data-type="(\w+)">(.*?)</tr>', page, re.S))
    assert set(rows) == set(stack.declaration.types)
    assert '<td class="n dead bad">1</td>' in rows["buggy"]
    assert '<td class="n dead">0</td>' in rows["noop"]
    # the fragment the page refreshes itself with has the same rows
    fragment = read_only.get("/overview/rows").text
    assert 'data-type="buggy"' in fragment and "<html" not in fragment
    # and the page's script, from the package, refreshes it
    assert 'data-refresh="/overview/rows"' in page and '<script src="/static/ui.js"' in page


def test_a_type_page_lists_its_dead_letters_filterable_by_reason_and_error(
    read_only: Ui, dead_job: JobSpecification
) -> None:
    page = read_only.get("/types/buggy").text
    assert dead_job.id in page and "attempts_exhausted" in page and "RuntimeError: parser crashed on Main Page" in page
    assert "Recent failures" in page and "<dt>attempts</dt><dd>1 " in page and "tracked (track_status)" in page
    by_reason = read_only.get("/types/buggy", params={"reason": "non_retryable"}).text
    assert dead_job.id not in by_reason.split("Recent failures")[0] and "No dead letter matches" in by_reason
    by_error = read_only.get("/types/buggy", params={"error": "PARSER"}).text
    assert f'job?id={dead_job.id}"' in by_error.split("Recent failures")[0]
    assert "No dead letter matches" in read_only.get("/types/buggy", params={"error": "cache"}).text
    # params are not on the type's page at all
    assert "someone@example.org" not in page


def test_a_job_page_shows_its_traceback_and_hides_its_params_until_asked(
    read_only: Ui, dead_job: JobSpecification
) -> None:
    page = read_only.get("/types/buggy/job", params={"id": dead_job.id}).text
    assert "Traceback (most recent call last)" in page and "RuntimeError: parser crashed on Main Page" in page
    assert '<dd class="state dead_lettered">dead_lettered</dd>' in page  # buggy tracks its status
    # the params are there, folded: a <details> that is not open
    details = re.search(r"<details([^>]*)>(.*?)</details>", page, re.S)
    assert details is not None and "open" not in details.group(1)
    assert "someone@example.org" in details.group(2)
    assert page.count("someone@example.org") == 1


def test_unknown_types_and_jobs_are_404_with_one_line(read_only: Ui) -> None:
    unknown = read_only.get("/types/nope")
    assert unknown.status_code == 404 and "nope" in unknown.text
    missing = read_only.get("/types/buggy/job", params={"id": "no-such-job"})
    assert missing.status_code == 404 and "no records of job no-such-job" in missing.text


def test_every_response_has_a_strict_content_security_policy(read_only: Ui) -> None:
    for url in ("/", "/static/ui.css", "/static/ui.js", "/types/nope"):
        response = read_only.get(url)
        headers = response.headers
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "default-src 'self'" in CONTENT_SECURITY_POLICY and "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
        assert headers["cache-control"] == "no-store" and headers["x-frame-options"] == "DENY"
    page = read_only.get("/").text
    # nothing loads from elsewhere, and nothing inline needs the policy relaxed
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<script>" not in page and " style=" not in page


# -- actions off ---------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["redrive", "delete", "purge"])
def test_with_actions_off_there_are_no_buttons_and_every_post_is_refused(
    read_only: Ui, dead_job: JobSpecification, stack: LocalStack, action: str
) -> None:
    for url in ("/types/buggy", f"/types/buggy/job?id={dead_job.id}"):
        page = read_only.get(url).text
        assert '<form class="action"' not in page and "<button" not in page.split("</form>", 1)[-1]
        assert "Redrive" not in page and "Purge" not in page and "Delete" not in page
    # even a well-formed, confirmed POST with the right token
    refused = read_only.post(f"/types/buggy/{action}", form(mode="all", ids=dead_job.id, confirm="yes"))
    assert refused.status_code == 403 and "--allow-actions" in refused.text
    assert stack.queue_depth("buggy", dlq=True) == 1


# -- actions on ----------------------------------------------------------------------------------


def test_with_actions_on_the_pages_have_buttons(actions: Ui, dead_job: JobSpecification) -> None:
    page = actions.get("/types/buggy").text
    for label in ("Redrive all", "Purge", ">Redrive<", ">Delete<"):
        assert label in page
    assert f'name="csrf" value="{CSRF}"' in page
    assert ">Redrive<" in actions.get("/types/buggy/job", params={"id": dead_job.id}).text


@pytest.mark.parametrize(
    ("fields", "headers", "why"),
    [
        ({}, {}, "token is missing or wrong"),
        ({"csrf": "guessed"}, {}, "token is missing or wrong"),
        ({"csrf": CSRF}, {"origin": "http://evil.example"}, "another origin"),
        ({"csrf": CSRF}, {"origin": "null"}, "another origin"),
        ({"csrf": CSRF}, {"sec-fetch-site": "cross-site"}, "another site"),
        ({"csrf": CSRF}, {"sec-fetch-site": "same-site"}, "another site"),
    ],
)
def test_a_cross_site_post_is_refused(
    actions: Ui,
    dead_job: JobSpecification,
    stack: LocalStack,
    fields: dict[str, str],
    headers: dict[str, str],
    why: str,
) -> None:
    for action in ("redrive", "delete", "purge"):
        data = {"mode": "all", "ids": dead_job.id, "confirm": "yes", **fields}
        refused = actions.post(f"/types/buggy/{action}", data, headers=headers)
        assert refused.status_code == 403 and why in refused.text
    assert stack.queue_depth("buggy", dlq=True) == 1


def test_a_redrive_asks_first_then_reports_what_it_moved_and_the_job_runs(
    actions: Ui, dead_job: JobSpecification, stack: LocalStack
) -> None:
    [dead] = stack.dead_letters("buggy")
    stack.clock.advance(1)
    same_origin = {"origin": LOCAL, "sec-fetch-site": "same-origin"}
    # Without confirm=yes: the dry run, and a form that asks again
    asked = actions.post("/types/buggy/redrive", form(mode="one", ids=dead["MessageId"]), headers=same_origin)
    assert asked.status_code == 200 and "Send 1 dead letter" in asked.text
    assert 'name="confirm" value="yes"' in asked.text and dead_job.id in asked.text
    assert stack.queue_depth("buggy", dlq=True) == 1 and stack.queue_depth("buggy") == 0
    # Confirmed, after the fix: moved, and it runs and succeeds
    BROKEN.clear()
    done = actions.post(
        "/types/buggy/redrive", form(mode="one", ids=dead["MessageId"], confirm="yes"), headers=same_origin
    )
    assert done.status_code == 200 and 'class="moved-count">1<' in done.text
    assert stack.queue_depth("buggy", dlq=True) == 0
    stack.drain()
    assert stack.results.attempts(dead_job.id)[-1].outcome == Outcome.SUCCEEDED
    job = actions.get("/types/buggy/job", params={"id": dead_job.id}).text
    assert '<dd class="state succeeded">succeeded</dd>' in job


def test_a_filtered_redrive_takes_the_rows_shown_and_checks_the_error_again(
    actions: Ui, dead_job: JobSpecification, stack: LocalStack
) -> None:
    page = actions.get("/types/buggy", params={"reason": "attempts_exhausted"}).text
    [message_id] = re.findall(r'data-message-id="([^"]+)"', page)
    assert "Redrive the 1 shown" in page
    nothing = actions.post("/types/buggy/redrive", form(mode="filtered", reason="poison", confirm="yes"))
    assert "Nothing was redriven" in nothing.text
    no_match = actions.post("/types/buggy/redrive", form(mode="filtered", ids=message_id, error="cache", confirm="yes"))
    assert 'class="moved-count">0<' in no_match.text
    assert stack.queue_depth("buggy", dlq=True) == 1
    fields = form(mode="filtered", ids=message_id, reason="attempts_exhausted", error="PARSER")
    asked = actions.post("/types/buggy/redrive", fields)
    assert (
        "Send 1 dead letter (the 1 shown, with reason attempts_exhausted and error containing &#39;PARSER&#39;)"
        in asked.text
    )
    moved = actions.post("/types/buggy/redrive", {**fields, "confirm": "yes"})
    assert 'class="moved-count">1<' in moved.text
    assert stack.queue_depth("buggy", dlq=True) == 0 and stack.queue_depth("buggy") == 1


def test_delete_and_purge_ask_first_then_report_what_they_removed(actions: Ui, stack: LocalStack) -> None:
    BROKEN.update({"A", "B", "C"})
    specs = [JobSpecification("buggy", {"page": page}) for page in ("A", "B", "C")]
    stack.queue_group().push(specs)
    stack.drain()
    stack.clock.advance(1)
    # the page's forms name the rows by message ID
    [first] = [m["MessageId"] for m in stack.dead_letters("buggy") if specs[0].id in m["Body"]]
    stack.clock.advance(1)
    asked = actions.post("/types/buggy/delete", form(ids=first))
    assert "Permanently delete dead letter" in asked.text and stack.queue_depth("buggy", dlq=True) == 3
    deleted = actions.post("/types/buggy/delete", form(ids=first, confirm="yes"))
    assert 'class="removed-count">1<' in deleted.text and stack.queue_depth("buggy", dlq=True) == 2
    asked = actions.post("/types/buggy/purge", form())
    assert "Permanently delete every message in test-buggy-dlq" in asked.text
    assert stack.queue_depth("buggy", dlq=True) == 2
    purged = actions.post("/types/buggy/purge", form(confirm="yes"))
    assert 'class="removed-count">2<' in purged.text and stack.queue_depth("buggy", dlq=True) == 0


def test_an_action_on_the_rows_shown_never_takes_a_job_a_sender_named_after_one_of_them(
    actions: Ui, dead_job: JobSpecification, stack: LocalStack
) -> None:
    [shown] = stack.dead_letters("buggy")
    # A sender puts a job into the DLQ whose job ID is the shown dead letter's message ID
    twin = JobSpecification("buggy", {"page": "elsewhere"}, id=shown["MessageId"]).stamped(stack.clock.now())
    stack.sqs.send_message(QueueUrl=stack.queue_urls["test-buggy-dlq"], MessageBody=twin.to_message())
    stack.clock.advance(1)
    # a filtered redrive of the one row moves that row
    asked = actions.post("/types/buggy/redrive", form(mode="filtered", ids=shown["MessageId"]))
    assert "Send 1 dead letter" in asked.text, asked.text
    # and deleting the row deletes it alone
    deleted = actions.post("/types/buggy/delete", form(ids=shown["MessageId"], confirm="yes"))
    assert 'class="removed-count">1<' in deleted.text and stack.queue_depth("buggy", dlq=True) == 1


# -- who may open the pages ----------------------------------------------------------------------


def test_with_a_token_every_request_needs_it(stack: LocalStack) -> None:
    ui = Ui(stack, UiSettings(token=TOKEN, loopback=False), base_url="http://10.0.0.5:8765")
    client = ui.client
    for url in ("/", "/overview/rows", "/types/buggy", "/static/ui.css"):
        assert client.get(url).status_code == 401
    assert client.post("/types/buggy/purge", data=form(confirm="yes")).status_code == 401
    assert client.get("/", params={"token": "wrong"}).status_code == 401
    assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    # ?token= once: a redirect to the same page without it, and a strict cookie
    login = client.get("/types/buggy", params={"token": TOKEN, "reason": "poison"}, follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/types/buggy?reason=poison"
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert TOKEN not in cookie  # a digest, not the token
    assert client.get("/").status_code == 200  # the client kept the cookie
    # the redirect stays on this site, whatever the path decodes to
    for path in ("/%2F%2Fevil.example", "/%09/evil.example", "/%5C%5Cevil.example"):
        away = client.get(path, params={"token": TOKEN}, follow_redirects=False)
        assert away.status_code == 303 and away.headers["location"].startswith("/"), away.headers["location"]
        assert not away.headers["location"].startswith(("//", "/\\")), away.headers["location"]
    client.cookies.clear()
    client.cookies.set(COOKIE, "forged")
    assert client.get("/").status_code == 401


def test_without_a_token_only_loopback_host_names_are_served(stack: LocalStack) -> None:
    ui = Ui(stack, UiSettings())
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "localhost"):
        assert ui.client.get("/", headers={"host": host}).status_code == 200
    for host in ("evil.example:8765", "evil.example", "10.0.0.5:8765"):  # DNS rebinding, or a LAN address
        assert ui.client.get("/", headers={"host": host}).status_code == 421


def test_on_a_shared_queue_a_dead_letter_that_is_no_job_shows_on_its_types_pages(
    actions: Ui, stack: LocalStack
) -> None:
    stack.sqs.send_message(QueueUrl=stack.queue_urls["test-lowTraffic-dlq"], MessageBody="garbage, not a job")
    stack.clock.advance(1)
    [message] = stack.dead_letters("lowTraffic")
    stack.clock.advance(1)
    for name in ("rare", "rarer"):  # the two types of the shared queue
        page = actions.get(f"/types/{name}").text
        assert f"not a job: message {message['MessageId']}" in page
    # and it can be deleted from there, by its message ID
    deleted = actions.post("/types/rare/delete", form(ids=message["MessageId"], confirm="yes"))
    assert 'class="removed-count">1<' in deleted.text and stack.queue_depth("lowTraffic", dlq=True) == 0
