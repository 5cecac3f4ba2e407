"""A batch's page in `jobkit ui`: its progress, its callbacks, the members that
failed and those it waits for, each linked to its job's page; a chain's step
linked to the next. Read only, through the app's HTTP routes, on the local stack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.ui.settings import UiSettings

from .client import Ui
from conftest import START
from testjobs import BROKEN, SCRIPTED

DECLARATION = """
[jobkit]
prefix = "uibatch"
namespace = "jobkit-uibatch"

[types.page]
class = "testjobs:ScriptedJob"
batches = true
max_attempts = 1

[types.next]
class = "testjobs:ScriptedJob"
batches = true
batch_callback = true
"""


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture
def stack(jobs_toml: Path) -> Iterator[LocalStack]:
    with LocalStack(load_declaration(jobs_toml), clock=VirtualClock(START), seed=5) as local:
        SCRIPTED.clear()
        BROKEN.clear()
        yield local
        SCRIPTED.clear()


@pytest.fixture
def ui(stack: LocalStack, jobs_toml: Path) -> Ui:
    return Ui(stack, UiSettings(), config_path=jobs_toml)


def test_a_batch_page_shows_its_progress_failures_callbacks_and_what_it_waits_for(ui: Ui, stack: LocalStack) -> None:
    group = stack.queue_group("wiki")
    done = JobSpecification("next", {"script": {}})
    with group.batch(on_complete=done, description="edit <5>", id="edit-5") as batch:
        batch.push([JobSpecification("page", {"script": {}}, id=f"p{n}") for n in range(3)])
        batch.push(JobSpecification("page", {"script": {"permanent": True}}, id="bad"))
    stack.drain()
    with group.batch(on_complete=done, id="open-1") as waiting:
        waiting.push(JobSpecification("page", {"script": {}}, id="queued"))
    ended = ui.get("/batch?id=edit-5&domain=wiki")
    assert ended.status_code == 200, ended.text
    page = ended.text
    assert "Batch edit-5" in page and "edit &lt;5&gt;" in page and "<5>" not in page
    assert '<progress max="4" value="4">' in page and "4 of 4 ended" in page
    assert '<a href="/types/page/job?id=bad">page bad</a> <span class="reason">dead-lettered</span>' in page
    assert "<strong>on_complete</strong> (next): pushed" in page
    open_page = ui.get("/batch?id=open-1&domain=wiki").text
    assert "waiting for 1 member(s)" in open_page and '<a href="/types/page/job?id=queued">page queued</a>' in open_page
    assert "not yet: the batch has not ended" in open_page
    stack.drain()


def test_a_chain_step_links_its_next_step(ui: Ui, stack: LocalStack) -> None:
    group = stack.queue_group(None)
    group.chain([JobSpecification("page", {"script": {}}), JobSpecification("next", {"script": {}})], id="c")
    stack.drain()
    page = ui.get("/batch?id=c-1").text
    assert '<a href="/batch?id=c-2">batch c-2</a>' in page
    assert "(the next step of chain c, batch c-2): pushed" in page
    assert "1 of 1 ended" in ui.get("/batch?id=c-2").text


def test_the_batch_page_asks_for_an_id_and_says_what_is_wrong_with_one(ui: Ui, stack: LocalStack) -> None:
    asked = ui.get("/batch")
    assert asked.status_code == 200 and 'name="id"' in asked.text and 'name="domain"' in asked.text
    assert 'href="/batch"' in ui.get("/").text
    missing = ui.get("/batch?id=nope&domain=wiki")
    assert missing.status_code == 404 and "no batch &#39;nope&#39; in domain &#39;wiki&#39;" in missing.text
    for bad in ("/batch?id=a%20b", "/batch?id=" + "x" * 81, "/batch?id=a&domain=" + "d" * 300):
        refused = ui.get(bad)
        assert refused.status_code == 400, (bad, refused.text)


def test_a_callback_whose_params_name_a_chain_is_no_chain_step(ui: Ui, stack: LocalStack) -> None:
    # found by review: the page read a chain from any on_success's params
    group = stack.queue_group("wiki")
    with group.batch(on_success=JobSpecification("next", {"chain": "deploy", "step": 2, "script": {}}), id="p"):
        pass
    page = ui.get("/batch?id=p&domain=wiki").text
    assert "A chain's step" not in page and "deploy-2" not in page
    assert "<strong>on_success</strong> (next)" in page
    stack.drain()
