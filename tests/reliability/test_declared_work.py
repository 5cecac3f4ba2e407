"""Work the declaration promises is work the runner takes: a schedule whose
every firing the runner would dead-letter as poison does not load; a job sent
without a correlation ID takes one from its ID however long the ID; and a job
that pushes a type its ``pushes`` lacks fails its attempt saying which line to
add (and ``jobkit template --check`` says so before the deploy, where the
class's code shows it)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from ops_cli import cli_for

from jobkit import JobSpecification
from jobkit.cli import main
from jobkit.core.correlation import valid_correlation_id
from jobkit.core.errors import ConfigError, JobQueueError, UnknownJobType
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import declaration_to_dict, load_declaration, parse_declaration
from jobkit.local import FakeLambdaContext, LocalStack
from jobkit.records.keys import JobRef
from jobkit.testing import JobkitStack, sqs_event

import testjobs
from conftest import FIXTURES

SIGNATURE = "0b5f3c6e9d2a4f8b1c7e5a3d9f0b2c4e6a8d1f3b"


def jobkit(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


# -- 1. a schedule whose every firing would be poison does not load ---------------------------------

TYPES = """
[types.noop]
class = "testjobs:NoopJob"

[types.typed]
class = "testjobs:TypedJob"

[types.typed.params_schema]
type = "object"
required = ["title", "pages"]
properties.title = { type = "string" }
properties.pages = { type = "array", items = { type = "integer", minimum = 0 } }
"""

POISON_SCHEDULES = [
    pytest.param("typed", '{ title = "Main Page", pages = "all" }', "params.pages must be array", id="schema"),
    pytest.param("typed", '{ title = "Main Page" }', "params must contain ['pages']", id="schema-required"),
    pytest.param(
        "noop",
        f'{{ rootJobSignature = "{SIGNATURE}", rootJobTimestamp = 1700000000000 }}',
        "params.rootJobTimestamp is",
        id="root-milliseconds",
    ),
    pytest.param(
        "noop",
        f'{{ rootJobSignature = "{SIGNATURE}", rootJobTimestamp = 4102444800 }}',  # 2100-01-01
        "params.rootJobTimestamp is",
        id="root-future",
    ),
]


def declaration_file(directory: Path, job_type: str, params: str) -> Path:
    path = directory / "jobs.toml"
    path.write_text(f'{TYPES}\n[schedules.nightly]\ntype = "{job_type}"\nrate = "1 day"\nparams = {params}\n')
    return path


@pytest.mark.parametrize(("job_type", "params", "problem"), POISON_SCHEDULES)
def test_a_schedule_every_firing_of_which_would_be_poison_does_not_load(
    tmp_path: Path, job_type: str, params: str, problem: str
) -> None:
    path = declaration_file(tmp_path, job_type, params)
    with pytest.raises(ConfigError) as refused:
        load_declaration(path)
    message = str(refused.value)
    # the file, the schedule's key, and what is wrong, in the words push uses
    assert message.startswith(f"{path}: schedules.nightly.params: every firing would be dead-lettered as poison: ")
    assert problem in message
    assert "sched-" not in message  # no made-up job ID


@pytest.mark.parametrize(("job_type", "params", "problem"), POISON_SCHEDULES)
def test_jobkit_template_and_its_check_refuse_it_before_the_deploy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job_type: str, params: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = declaration_file(tmp_path, job_type, params)
    for args in (["template"], ["template", "--check"]):
        result = jobkit(*args, "--config", str(path))
        assert result.exit_code == 1, result.output
        assert "schedules.nightly.params" in result.output and problem in result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "template.yaml").exists()


def test_the_schedule_is_refused_as_push_refuses_the_same_job(tmp_path: Path) -> None:
    # Given a job type whose params_schema the schedule's params break
    (tmp_path / "types.toml").write_text(TYPES)
    params = {"title": "Main Page", "pages": [-1]}
    path = declaration_file(tmp_path, "typed", '{ title = "Main Page", pages = [-1] }')
    with pytest.raises(ConfigError) as refused:
        load_declaration(path)
    # Then its refusal is push's, word for word (one rule, not two)
    with JobkitStack(load_declaration(tmp_path / "types.toml")) as stack:
        spec = JobSpecification("typed", params)
        with pytest.raises(JobQueueError) as pushed:
            stack.push(spec)
    [failed] = pushed.value.failed
    assert failed.code == "InvalidParams" and failed.message.startswith(f"typed {spec.id}: params do not match")
    assert str(refused.value).endswith(failed.message.removeprefix(f"typed {spec.id}: "))


def test_root_params_in_seconds_load_and_every_firing_runs() -> None:
    # A schedule of root jobs, with a timestamp in seconds: its firings are jobs the runner takes
    declaration = parse_declaration(
        {
            "types": {"noop": {"class": "testjobs:NoopJob"}},
            "schedules": {
                "hourly": {
                    "type": "noop",
                    "rate": "1 hour",
                    "params": {"rootJobSignature": SIGNATURE, "rootJobTimestamp": 1_700_000_000},
                }
            },
        },
        source="jobs.toml",
    )
    with JobkitStack(declaration, frozen=True) as stack:
        start = stack.clock.now()
        stack.drain(until=start + 3 * 3600 + 1)
        assert stack.outcomes("noop") == {Outcome.SUCCEEDED: 3}


# -- 2. a long job ID still gives a correlation ID -----------------------------------------------------


LONG_ID = "import-2026-11-25-" + "x" * 62  # 80 characters, the most a job ID may have


def send_bare(stack: LocalStack, spec: JobSpecification) -> None:
    """As a schedule's firing, or another language's producer, sends a job: the body alone."""
    url = stack.queue_url(stack.declaration.job_type(spec.type).queue)
    stack.sqs.send_message(QueueUrl=url, MessageBody=spec.stamped(stack.clock.now()).to_message())


@pytest.mark.parametrize("length", [64, 65, 72, 80])
def test_a_long_job_id_gives_a_correlation_id_its_children_share(stack: LocalStack, length: int) -> None:
    parent = JobSpecification("fanOut", {"leaves": 2}, id=LONG_ID[:length])
    send_bare(stack, parent)
    stack.drain()

    ran = [r for r in stack.results.results if r.outcome is Outcome.SUCCEEDED]
    assert len(ran) == 3 and parent.id in {r.job_id for r in ran}  # the parent and its two children
    [correlation] = {r.correlation_id for r in ran}  # one, which the children share
    assert correlation is not None and valid_correlation_id(correlation) == correlation  # at most 64 characters
    assert correlation == parent.id if length <= 64 else correlation.startswith(parent.id[:47])

    # the same job sent again takes the same one: it is derived from its ID, not made up
    stack.results.clear()
    send_bare(stack, parent)
    stack.drain()
    assert {r.correlation_id for r in stack.results.results} == {correlation}


def test_a_long_id_s_dead_letter_leads_to_the_correlation_its_runner_logged(stack: LocalStack) -> None:
    failing = JobSpecification("alwaysFails", {"why": "a bug"}, id=LONG_ID)
    send_bare(stack, failing)
    stack.drain()
    [correlation] = {r.correlation_id for r in stack.results.results if r.job_id == LONG_ID}
    assert correlation is not None and correlation.startswith(LONG_ID[:47])
    shown = json.loads(cli_for(stack)("dlq", "show", "alwaysFails", LONG_ID, "--json").stdout)
    assert [m["correlation_id"] for m in shown["messages"]] == [correlation]
    failures = stack.journal().failures(JobRef("alwaysFails", None, LONG_ID))
    assert failures and {f.correlation_id for f in failures} == {correlation}


# -- 3. a push to a type missing from pushes says which line to add ----------------------------------

RELIABILITY = FIXTURES / "reliability.toml"
ADD_PLAIN = f'add "plain" to pushes of [types.parent] in {RELIABILITY}'


@pytest.fixture
def reliability() -> Iterator[JobkitStack]:
    with JobkitStack.from_config(RELIABILITY, frozen=True) as stack:
        testjobs.use_clock(stack.clock)
        testjobs.SCRIPTED.clear()
        yield stack


def pushing_plain() -> JobSpecification:
    """A job of type parent (pushes = ["once"]) that pushes a job of type plain, declared on another queue."""
    return JobSpecification("parent", {"script": {"children": {"type": "plain", "count": 1}}})


def test_the_pushing_job_fails_each_attempt_naming_the_pushes_to_add_and_is_dead_lettered(
    reliability: JobkitStack,
) -> None:
    spec = pushing_plain()
    reliability.push(spec)
    # jobkit.testing re-raises the dead-lettered job's error
    with pytest.raises(JobQueueError, match=re.escape(ADD_PLAIN)) as raised:
        reliability.drain()
    assert "not declared in jobs.toml" not in str(raised.value)

    # The local stack's runner: every attempt failed with the reason, retried, then dead-lettered
    results = [r for r in reliability.results if r.job_id == spec.id]
    assert [r.outcome for r in results] == [Outcome.RETRIED, Outcome.RETRIED, Outcome.DEAD_LETTERED]
    assert all(r.error is not None and ADD_PLAIN in r.error for r in results)
    assert all(r.error is not None and "UnknownJobType" in r.error for r in results)
    assert reliability.outcomes("plain") == {}  # nothing was sent that no runner could take
    # nothing lost: the job is in its DLQ, and its failures are on record with the reason
    reliability.advance(1)
    [dead] = reliability.dead_letters("parent")
    assert json.loads(dead["Body"])["id"] == spec.id
    failures = reliability.failures(spec)
    assert len(failures) == 3 and all(ADD_PLAIN in f.message for f in failures)


def test_the_runner_s_handler_reports_it_as_a_failed_record(reliability: JobkitStack) -> None:
    # The runner Lambda's handler, given the event the event source mapping delivers
    event = sqs_event([pushing_plain()], queue_arn=reliability.queue_arn("parent"), now=reliability.clock.now())
    response = reliability.handler("parent")(event, FakeLambdaContext())
    assert response["batchItemFailures"] == [{"itemIdentifier": event["Records"][0]["messageId"]}]
    [result] = reliability.results
    assert result.outcome is Outcome.RETRIED and result.error is not None and ADD_PLAIN in result.error


def test_a_runner_built_from_its_environment_says_the_same_naming_jobs_toml() -> None:
    # On AWS the runner's declaration is its environment's JSON: it names no file
    full = load_declaration(RELIABILITY)
    own = set(full.queues["parent"].types) | {"once"}
    runner = parse_declaration(declaration_to_dict(full, only_types=own), source="$JOBKIT_DECLARATION")
    with pytest.raises(UnknownJobType) as unknown:
        runner.pushed_type("parent", "plain")
    assert str(unknown.value) == (
        "unknown job type 'plain': [types.parent] does not list it in pushes, so its runner does not know it:"
        ' add "plain" to pushes of [types.parent] in jobs.toml (and declare [types.plain] if it is not declared)'
    )
    assert runner.pushed_type("parent", "once").name == "once"
    # an app's push, outside any job, names no pushing type: the type is simply not declared
    with pytest.raises(UnknownJobType, match=r"it is not declared in jobs\.toml"):
        full.job_type("nope")


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    monkeypatch.chdir(root)
    assert jobkit("init").exit_code == 0
    return root


PARENT_JOB = """
from jobkit import Job, JobSpecification


class ParentJob(Job):
    @classmethod
    def for_user(cls, user: int) -> JobSpecification:
        return JobSpecification("accountAudit", {"user": user})  # a factory an app calls: not this job's push

    def run(self) -> bool:
        self.push(JobSpecification("parent", {"again": False}))  # its own type: its runner knows it
        self.push(JobSpecification(type="welcomeEmail", params={"user": self.params["user"]}))
        return True
"""


def declare_parent(app: Path, pushes: str = "") -> None:
    (app / "jobs" / "parent.py").write_text(PARENT_JOB)
    with (app / "infra" / "jobs.toml").open("a") as declaration:
        declaration.write(f'\n[types.parent]\nclass = "jobs.parent:ParentJob"\n{pushes}\n')
        declaration.write('\n[types.accountAudit]\nclass = "jobs.welcome_email:WelcomeEmailJob"\n')
    assert jobkit("template").exit_code == 0


def test_check_names_a_type_a_job_class_obviously_pushes_that_its_pushes_lacks(app: Path) -> None:
    declare_parent(app)
    result = jobkit("template", "--check")
    assert result.exit_code == 1, result.output
    assert 'infra/jobs.toml: types.parent.pushes: lacks "welcomeEmail"' in result.output
    assert "jobs/parent.py:12, in run()" in result.output
    assert 'add "welcomeEmail" to pushes of [types.parent]' in result.output
    assert "accountAudit" not in result.output and "Traceback" not in result.output


def test_check_passes_once_the_pushes_are_declared(app: Path) -> None:
    declare_parent(app, 'pushes = ["welcomeEmail"]')
    result = jobkit("template", "--check")
    assert result.exit_code == 0, result.output
