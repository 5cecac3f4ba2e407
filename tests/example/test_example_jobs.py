"""How an app developer tests jobs: only the public ``jobkit.testing`` API, end to end.

The ``jobkit_stack`` fixture comes from jobkit's pytest plugin; it reads the
declaration from the ``jobkit_config`` ini option, $JOBKIT_CONFIG, or
infra/jobs.toml.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from jobkit import JobSpecification, NonRetryableError
from jobkit.testing import FakeLambdaContext, JobkitStack, Outcome, sqs_event


def test_an_email_is_sent_once_even_if_its_message_comes_twice(jobkit_stack: JobkitStack) -> None:
    # enotifNotify is declared deliver_once: the same job (same ID) runs once
    spec = JobSpecification("enotifNotify", {"recipient": "ann@example.org", "page": "Main Page", "editor": "Bob"})
    jobkit_stack.push(spec, domain="enwiki")
    jobkit_stack.push(spec, domain="enwiki")
    jobkit_stack.drain()
    assert jobkit_stack.outcomes("enotifNotify") == {Outcome.SUCCEEDED: 1, Outcome.REDELIVERED: 1}


def test_a_bad_address_fails_for_good_and_the_error_surfaces(jobkit_stack: JobkitStack) -> None:
    jobkit_stack.push(JobSpecification("enotifNotify", {"recipient": "not-an-address", "page": "P", "editor": "B"}))
    with pytest.raises(NonRetryableError, match="not an email address"):
        jobkit_stack.drain()
    [dead] = jobkit_stack.dead_letters("enotifNotify")
    assert dead["MessageAttributes"]["jobkit.reason"]["StringValue"] == "non_retryable"
    # the error names the param, not its value: an address is personal data
    assert dead["MessageAttributes"]["jobkit.error"]["StringValue"] == "param 'recipient' is not an email address"


class MailerError(Exception):
    """What a mailer might raise: its message quotes the address."""


def test_a_mailer_error_is_kept_without_the_address(jobkit_stack: JobkitStack, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(recipient: str, subject: str) -> None:
        raise MailerError(f"550 5.1.1 <{recipient}>: recipient address rejected")

    monkeypatch.setattr("jobtypes.enotif_notify._send_email", refuse)
    [job_id] = jobkit_stack.push(
        JobSpecification("enotifNotify", {"recipient": "ann@example.org", "page": "P", "editor": "B"})
    )
    jobkit_stack.drain(raise_errors=False)
    # EnotifNotifyJob.error_message keeps only the class of an error that is not its own
    failures = jobkit_stack.failures(job_id)
    assert [f.error_class for f in failures] == ["MailerError"] * 3
    assert all(f.message == "" and "ann@example.org" not in f.traceback for f in failures)
    [dead] = jobkit_stack.dead_letters("enotifNotify")
    reasons = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items() if k.startswith("jobkit.")}
    assert reasons["jobkit.errorClass"] == "MailerError" and "ann@example.org" not in str(reasons)


def test_the_example_keeps_its_own_error_messages_only() -> None:
    from jobtypes.enotif_notify import EnotifNotifyJob  # the example job class

    job = EnotifNotifyJob(
        JobSpecification("enotifNotify", {"recipient": "ann@example.org", "page": "P", "editor": "B"})
    )
    own = NonRetryableError("param 'recipient' is not an email address")
    assert job.error_message(own) == str(own)
    assert job.error_message(MailerError("550 5.1.1 <ann@example.org>: recipient address rejected")) == ""


def test_a_crashing_page_is_retried_then_dead_lettered(jobkit_stack: JobkitStack) -> None:
    [job_id] = jobkit_stack.push(JobSpecification("refreshLinks", {"title": "Module:Broken"}))
    results = jobkit_stack.drain(raise_errors=False)
    assert [r.outcome for r in results] == [Outcome.RETRIED, Outcome.RETRIED, Outcome.DEAD_LETTERED]
    assert [f.attempt for f in jobkit_stack.failures(job_id)] == [3, 2, 1]


def test_a_template_edit_fans_out_and_a_newer_edit_supersedes_it(jobkit_stack: JobkitStack) -> None:
    from jobtypes.html_cache_update import HTMLCacheUpdateJob  # the example job class

    jobkit_stack.push(HTMLCacheUpdateJob.new_for_backlinks("Template:X", backlinks=500, now=jobkit_stack.clock.now()))
    jobkit_stack.advance(1)
    jobkit_stack.push(HTMLCacheUpdateJob.new_for_backlinks("Template:X", backlinks=500, now=jobkit_stack.clock.now()))
    jobkit_stack.drain()
    # the older root is superseded before it runs; the newer one purges 500 pages in 10 leaves
    assert jobkit_stack.outcomes("htmlCacheUpdate") == {Outcome.SUPERSEDED: 1, Outcome.SUCCEEDED: 11}


def test_a_delayed_job_waits_for_its_release(jobkit_stack: JobkitStack) -> None:
    spec = JobSpecification("refreshLinks", {"title": "Later"}, delay=7200)
    jobkit_stack.push(spec)
    jobkit_stack.drain(until=jobkit_stack.clock.now() + 7199)
    assert jobkit_stack.outcomes("refreshLinks")[Outcome.SUCCEEDED] == 0
    jobkit_stack.drain()
    assert jobkit_stack.outcomes("refreshLinks")[Outcome.SUCCEEDED] == 1


def test_a_handler_can_be_called_with_a_built_event(jobkit_stack: JobkitStack) -> None:
    handler = jobkit_stack.handler("refreshLinks")
    event = sqs_event([JobSpecification("refreshLinks", {"title": "Main Page"})])
    assert handler(event, FakeLambdaContext()) == {"batchItemFailures": []}


def test_the_nightly_digest_goes_out_once_a_night_each_with_its_own_id(jobkit_stack: JobkitStack) -> None:
    # [schedules.nightlyDigest] fires at 03:00 Berlin time; three days pass on the virtual clock
    start = jobkit_stack.clock.now()
    results = jobkit_stack.drain(until=start + 3 * 86400)
    digests = [r for r in results if r.job_type == "emailDigest"]
    assert [r.outcome for r in digests] == [Outcome.SUCCEEDED] * 3
    assert len({r.job_id for r in digests}) == 3 and all((r.job_id or "").startswith("sched-") for r in digests)
    assert all(r.domain == "enwiki" for r in digests)
    # each ran at its firing, a day apart, and was picked up at once
    started = sorted(r.started_at or 0 for r in digests)
    assert [round(b - a) for a, b in pairwise(started)] == [86400, 86400]
    assert all((r.pickup_delay_ms or 0) < 1000 for r in digests)
