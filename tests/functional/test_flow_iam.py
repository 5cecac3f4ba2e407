"""IAM grants a runner exactly the kinds of record it uses in the jobs table:
of each type it runs, roots, duplicate claims, attempts and deferrals always;
delivery claims, status, leases, rate buckets and debounce windows only for the
types that declare the option that writes them (``jobkit.records.keys.kinds_used``).

Exact means both ways: a type without an option has no pattern for its kind,
and everything the runners really touch while running every kind of job (every
flow-control option, retries, dead letters, status, delivery claims, roots and
duplicates asked for by a spec) is allowed by the policy of the type's runner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.resources import CANARY_TYPE
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import Declaration, load_declaration, parse_declaration
from jobkit.local import LocalStack
from jobkit.local.cloudformation import translate
from jobkit.records.keys import EVERY_TYPE_KINDS, Kind, kind_pattern, kinds_used, partition_key
from jobkit.template import build, logical_id

import flowjobs
from conftest import FIXTURES, START, string_like

#: The kind each option adds, and a type that declares only that option.
OPTION_KINDS = {
    "deliver_once": (Kind.DELIVERY, {"deliver_once": True}),
    "track_status": (Kind.STATUS, {"track_status": True}),
    "concurrency": (Kind.LEASES, {"concurrency": {"key": "domain", "limit": 2}}),
    "rate_limit": (Kind.RATE, {"rate_limit": {"key": "domain", "per_second": 5}}),
    "debounce": (Kind.DEBOUNCE, {"debounce": {"key": "params.page", "wait_s": 30}}),
}


@pytest.fixture(scope="module")
def one_option_each() -> Declaration:
    """A type per option, each on its own queue, and a plain type."""
    types: dict[str, Any] = {"plain": {"class": "m:Plain"}}
    types |= {option: {"class": "m:Job", **declared} for option, (_, declared) in OPTION_KINDS.items()}
    return parse_declaration({"types": types}, source="jobs.toml")


def own_patterns(template: dict[str, Any], queue: str) -> list[str]:
    role = template["Resources"][f"{logical_id(queue)}RunnerRole"]
    [statement] = [
        s
        for policy in role["Properties"]["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
        if s.get("Sid") == "UseOwnTypesRecords"
    ]
    patterns: list[str] = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    # every runner also serves `jobkit verify`'s canary: its records are not a declared type's
    assert {f"{CANARY_TYPE}#status#*", f"{CANARY_TYPE}#dup#*"} <= set(patterns)
    return [p for p in patterns if not p.startswith(f"{CANARY_TYPE}#")]


def test_each_option_adds_exactly_its_kind(one_option_each: Declaration) -> None:
    assert kinds_used(one_option_each.types["plain"]) == EVERY_TYPE_KINDS
    for option, (kind, _) in OPTION_KINDS.items():
        assert set(kinds_used(one_option_each.types[option])) == {*EVERY_TYPE_KINDS, kind}, option


def test_a_type_with_an_option_gets_its_pattern_and_one_without_does_not(one_option_each: Declaration) -> None:
    template = translate(build(one_option_each), parameters={"Prefix": "jobkit"})
    for queue in one_option_each.queues:
        [job_type] = one_option_each.queues[queue].types
        granted = own_patterns(template, queue)
        expected = {kind_pattern(job_type, kind) for kind in EVERY_TYPE_KINDS}
        if job_type in OPTION_KINDS:
            expected.add(kind_pattern(job_type, OPTION_KINDS[job_type][0]))
        assert granted == sorted(expected), queue
        for kind in Kind:  # a key of every kind, with awkward characters in its name
            key = partition_key(job_type, kind, "=x#y*z")
            assert any(string_like(p, key) for p in granted) == (kind_pattern(job_type, kind) in expected), key
        assert not any(string_like(p, partition_key("other", Kind.ROOT, "x")) for p in granted)


def test_the_flow_fixture_types_get_the_patterns_of_their_options() -> None:
    declaration = load_declaration(FIXTURES / "flow.toml")
    template = translate(build(declaration), parameters={"Prefix": "flow"})
    by_type = {t: own_patterns(template, declaration.types[t].queue) for t in declaration.types}
    assert "limited#lease#*" in by_type["limited"] and "limited#rate#*" not in by_type["limited"]
    assert "rated#rate#*" in by_type["rated"] and "rated#lease#*" not in by_type["rated"]
    assert "debounced#debounce#*" in by_type["debounced"] and "debounced#lease#*" not in by_type["debounced"]
    assert {"everything#lease#*", "everything#rate#*", "everything#debounce#*"} <= set(by_type["everything"])
    # delivery claims only where declared (the one deliver_once type), status nowhere
    once = {t for t, patterns in by_type.items() for p in patterns if p.startswith(f"{t}#once#")}
    assert once == {t for t, job_type in declaration.types.items() if job_type.deliver_once} == {"onceLimited"}
    assert not any("#status#" in p for patterns in by_type.values() for p in patterns)


# -- what the runners really touch ------------------------------------------------------------


class PartitionKeys:
    """The partition key of every DynamoDB item request a client makes."""

    def __init__(self, client: Any) -> None:
        self.keys: set[str] = set()
        client.meta.events.register("provide-client-params.dynamodb.*", self._remember)

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        item = params.get("Key") or params.get("Item") or {}
        value = item.get("pk") or params.get("ExpressionAttributeValues", {}).get(":pk")
        assert value is not None, params  # every request names its partition (no Scan)
        self.keys.add(value["S"])


def assert_allowed(declaration: Declaration, touched: set[str]) -> None:
    template = translate(build(declaration), parameters={"Prefix": "test"})
    for key in touched:
        job_type = key.split("#", 1)[0]
        patterns = own_patterns(template, declaration.types[job_type].queue)
        assert any(string_like(p, key) for p in patterns), (key, patterns)


@pytest.fixture
def flow_stack() -> Iterator[LocalStack]:
    with LocalStack(load_declaration(FIXTURES / "flow.toml"), clock=VirtualClock(START), seed=1) as stack:
        flowjobs.reset()
        yield stack
        flowjobs.reset()


def test_everything_the_flow_stages_touch_is_allowed(flow_stack: LocalStack) -> None:
    keys = PartitionKeys(flow_stack.dynamodb)
    for domain in ("a", "b"):
        group = flow_stack.queue_group(domain)
        for job_type in flow_stack.declaration.types:
            group.push([JobSpecification(job_type, {"page": "P", "mailbox": "m", "n": n}) for n in range(4)])
    flowjobs.DURING.extend([flow_stack.poll_once] * 4)  # containers side by side: leases are refused
    flow_stack.drain()
    kinds = {key.split("#")[1] for key in keys.keys}
    assert {"lease", "rate", "debounce", "dup"} <= kinds, kinds  # the workload used every flow kind
    assert_allowed(flow_stack.declaration, keys.keys)


def test_everything_the_other_stages_touch_is_allowed(stack: LocalStack) -> None:
    keys = PartitionKeys(stack.dynamodb)
    group = stack.queue_group("enwiki")
    root = new_root_job_params("Template:Cite", START)
    group.push(
        [
            JobSpecification("noop", {"n": 1}),
            JobSpecification("noop", {"n": 2}, remove_duplicates=True),  # the spec asks for a duplicate claim
            JobSpecification("leaf", {"n": 3, **root}),  # a root job of a type that declares nothing
            JobSpecification("flaky", {"fail_times": 1}),
            JobSpecification("once", {}),
            JobSpecification("dedup", {"n": 4}),
            JobSpecification("tracked", {}),
            JobSpecification("fanOut", {"leaves": 3, **new_root_job_params("fan", START)}),
            JobSpecification("rare", {}),
        ]
    )
    group.push(JobSpecification("noop", {"n": 5}, delay=3600))
    stack.drain()
    kinds = {key.split("#")[1] for key in keys.keys}
    assert {"root", "dup", "once", "runs", "status"} <= kinds, kinds
    assert_allowed(stack.declaration, keys.keys)
