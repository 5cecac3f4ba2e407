"""JobSpecification: dedup hashing, root-job params, and the wire format."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobkit import Job, JobSpecification, SpecError
from jobkit.core.spec import new_root_job_params

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "job-spec.schema.json").read_text())
validator = jsonschema.Draft202012Validator(SCHEMA)

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
params_strategy = st.dictionaries(st.text(min_size=1, max_size=12), json_values, max_size=8)


# -- dedup hash ----------------------------------------------------------------


@given(params_strategy, st.randoms())
def test_dedup_hash_ignores_param_order(params: dict[str, Any], rng: random.Random) -> None:
    shuffled_keys = list(params)
    rng.shuffle(shuffled_keys)
    shuffled = {key: params[key] for key in shuffled_keys}
    assert (
        JobSpecification("refreshLinks", params).dedup_hash() == JobSpecification("refreshLinks", shuffled).dedup_hash()
    )


def test_dedup_hash_ignores_nested_key_order() -> None:
    a = JobSpecification("refreshLinks", {"page": {"ns": 0, "title": "X"}})
    b = JobSpecification("refreshLinks", {"page": {"title": "X", "ns": 0}})
    assert a.dedup_hash() == b.dedup_hash()


def test_dedup_hash_ignores_root_release_and_request_params() -> None:
    plain = JobSpecification("refreshLinks", {"title": "X"}, domain="enwiki")
    noisy = JobSpecification(
        "refreshLinks",
        {
            "title": "X",
            **new_root_job_params("refreshLinks:X", 123.0),
            "jobReleaseTimestamp": 99,
            "requestId": "abc",
        },
        domain="enwiki",
        release_at=1_900_000_000,
    )
    assert plain.dedup_hash() == noisy.dedup_hash()


def test_dedup_hash_ignores_declared_ignore_params() -> None:
    a = JobSpecification(
        "refreshLinks", {"title": "X", "causeAction": "edit"}, remove_duplicates_ignore_params=["causeAction"]
    )
    b = JobSpecification(
        "refreshLinks", {"title": "X", "causeAction": "purge"}, remove_duplicates_ignore_params=["causeAction"]
    )
    c = JobSpecification("refreshLinks", {"title": "X", "causeAction": "purge"})
    assert a.dedup_hash() == b.dedup_hash()
    assert a.dedup_hash() == c.dedup_hash(ignore_params=["causeAction"])
    assert a.dedup_hash() != c.dedup_hash()


@pytest.mark.parametrize(
    "other",
    [
        JobSpecification("refreshLinks", {"title": "Y"}, domain="enwiki"),
        JobSpecification("refreshLinks", {"title": "X"}, domain="dewiki"),
        JobSpecification("refreshLinks", {"title": "X"}),
        JobSpecification("htmlCacheUpdate", {"title": "X"}, domain="enwiki"),
    ],
    ids=["params", "domain", "no-domain", "type"],
)
def test_dedup_hash_differs_by_type_domain_and_params(other: JobSpecification) -> None:
    assert JobSpecification("refreshLinks", {"title": "X"}, domain="enwiki").dedup_hash() != other.dedup_hash()


def test_deduplication_info_shape() -> None:
    spec = JobSpecification("refreshLinks", {"title": "X", "rootJobSignature": "a" * 40}, domain="enwiki")
    assert spec.deduplication_info() == {"type": "refreshLinks", "domain": "enwiki", "params": {"title": "X"}}


# -- root jobs -------------------------------------------------------------------


def test_new_root_job_params_are_mediawikis() -> None:
    params = Job.new_root_job_params("htmlCacheUpdate:templatelinks:Template:X", now=1_700_000_000.25)
    assert params == {
        "rootJobIsSelf": True,
        "rootJobSignature": hashlib.sha1(b"htmlCacheUpdate:templatelinks:Template:X").hexdigest(),
        "rootJobTimestamp": 1_700_000_000.25,
    }


def test_root_and_leaf() -> None:
    root = JobSpecification("htmlCacheUpdate", {"page": "T", **new_root_job_params("k", 5.5)})
    leaf = JobSpecification("htmlCacheUpdate", {"pages": ["A"], **root.root_job_params()})
    plain = JobSpecification("htmlCacheUpdate", {"pages": ["A"]})
    assert root.is_root_job() and root.has_root_job_params()
    assert leaf.has_root_job_params() and not leaf.is_root_job()
    assert leaf.root_job_params() == {"rootJobSignature": root.params["rootJobSignature"], "rootJobTimestamp": 5.5}
    assert not plain.has_root_job_params() and plain.root_job_params() == {}


# -- wire format -------------------------------------------------------------------

specs = st.builds(
    lambda type_, params, domain, dedup, ignore, release, enqueued, batch: JobSpecification(
        type_,
        params,
        domain=domain,
        remove_duplicates=dedup,
        remove_duplicates_ignore_params=ignore,
        release_at=release,
        enqueued_at=enqueued,
        batch=batch,
    ),
    st.from_regex(r"[a-z][A-Za-z0-9]{0,20}", fullmatch=True),
    params_strategy,
    st.none() | st.text(min_size=1, max_size=30),
    st.booleans(),
    st.lists(st.text(min_size=1, max_size=8), max_size=3),
    st.none() | st.floats(min_value=0, max_value=4e9),
    st.floats(min_value=0, max_value=4e9),
    st.none() | st.from_regex(r"[A-Za-z0-9_-]{1,80}", fullmatch=True),
)


@settings(max_examples=200)
@given(specs)
def test_wire_round_trip_is_valid_against_the_schema(spec: JobSpecification) -> None:
    body = spec.to_message()
    validator.validate(json.loads(body))
    assert JobSpecification.from_message(body) == spec


def test_message_is_compact_versioned_json() -> None:
    spec = JobSpecification("refreshLinks", {"title": "Ünïcode"}, domain="enwiki", id="job-1").stamped(1.5)
    assert json.loads(spec.to_message()) == {
        "v": 1,
        "id": "job-1",
        "type": "refreshLinks",
        "domain": "enwiki",
        "params": {"title": "Ünïcode"},
        "enqueuedAt": 1.5,
        "releaseAt": None,
        "removeDuplicates": False,
    }


def test_stamping_makes_delay_absolute_and_keeps_the_first_enqueue_time() -> None:
    spec = JobSpecification("noop", delay=30).stamped(100.0)
    assert (spec.enqueued_at, spec.release_at, spec.delay) == (100.0, 130.0, None)
    assert spec.stamped(200.0).enqueued_at == 100.0


BAD_BODIES = {
    "not json": "{nope",
    "not an object": "[1, 2]",
    "wrong version": '{"v": 3, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1}',
    "v2 without a batch": '{"v": 2, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1}',
    "a batch in v1": '{"v": 1, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1, "batch": {"id": "b"}}',
    "a batch without an id": '{"v": 2, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1, "batch": {}}',
    "a batch id with a #": '{"v": 2, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1, "batch": {"id": "b#1"}}',
    "a batch that is text": '{"v": 2, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1, "batch": "b"}',
    "boolean version": '{"v": true, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1}',
    "missing params": '{"v": 1, "id": "a", "type": "t", "enqueuedAt": 1}',
    "missing id": '{"v": 1, "type": "t", "params": {}, "enqueuedAt": 1}',
    "params not object": '{"v": 1, "id": "a", "type": "t", "params": [], "enqueuedAt": 1}',
    "type is a module path": '{"v": 1, "id": "a", "type": "os.system", "params": {}, "enqueuedAt": 1}',
    "enqueuedAt string": '{"v": 1, "id": "a", "type": "t", "params": {}, "enqueuedAt": "now"}',
    "field name not an identifier": '{"v": 1, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1, "a.b": "x"}',
    "bad signature": '{"v": 1, "id": "a", "type": "t", "params": {"rootJobSignature": "zz"}, "enqueuedAt": 1}',
    "bad root timestamp": '{"v": 1, "id": "a", "type": "t", "params": {"rootJobTimestamp": "x"}, "enqueuedAt": 1}',
    "id with spaces": '{"v": 1, "id": "a b", "type": "t", "params": {}, "enqueuedAt": 1}',
    "negative priorAttempts": '{"v": 1, "id": "a", "type": "t", "params": {}, "enqueuedAt": 1, "priorAttempts": -1}',
    "null root timestamp": (
        '{"v": 1, "id": "a", "type": "t", "enqueuedAt": 1,'
        ' "params": {"rootJobSignature": "' + "a" * 40 + '", "rootJobTimestamp": null}}'
    ),
    "signature without timestamp": (
        '{"v": 1, "id": "a", "type": "t", "enqueuedAt": 1, "params": {"rootJobSignature": "' + "a" * 40 + '"}}'
    ),
    "timestamp without signature": (
        '{"v": 1, "id": "a", "type": "t", "enqueuedAt": 1, "params": {"rootJobTimestamp": 5}}'
    ),
    "400-digit enqueuedAt": '{"v": 1, "id": "a", "type": "t", "params": {}, "enqueuedAt": ' + "9" * 400 + "}",
    "400-digit root timestamp": (
        '{"v": 1, "id": "a", "type": "t", "enqueuedAt": 1,'
        ' "params": {"rootJobSignature": "' + "a" * 40 + '", "rootJobTimestamp": ' + "9" * 400 + "}}"
    ),
}


def test_a_key_given_twice_is_refused_as_ambiguous() -> None:
    # Parsers disagree on which "type" counts: Python's and Node's take the last,
    # others the first. A body that means two things to two readers is poison.
    body = '{"v": 1, "id": "a", "type": "noop", "params": {}, "enqueuedAt": 1, "type": "buggy"}'
    with pytest.raises(SpecError, match="the key 'type' twice"):
        JobSpecification.from_message(body)
    nested = '{"v": 1, "id": "a", "type": "t", "params": {"p": 1, "p": 2}, "enqueuedAt": 1}'
    with pytest.raises(SpecError, match="the key 'p' twice"):
        JobSpecification.from_message(nested)


def test_times_no_clock_could_have_made_are_refused() -> None:
    now = 1_800_000_000.0
    ok = JobSpecification("t", new_root_job_params("k", now + 299), enqueued_at=now + 299, release_at=now + 365 * 86400)
    ok.check_times(now)
    cases = {
        "params.rootJobTimestamp is 3,600 s ahead": {"params": new_root_job_params("k", now + 3600)},
        "rootJobTimestamp .* looks like milliseconds": {"params": new_root_job_params("k", now * 1000)},
        "enqueuedAt is 400 s ahead": {"enqueued_at": now + 400},
        "releaseAt is 367 days after enqueuedAt": {"release_at": now + 367 * 86400},
        "releaseAt .* looks like milliseconds": {"release_at": now * 1000},
    }
    for message, changes in cases.items():
        fields: dict[str, Any] = {"enqueued_at": now, **changes}
        spec = JobSpecification("t", fields.pop("params", {}), **fields)
        with pytest.raises(SpecError, match=message):
            spec.check_times(now)


def test_jobs_without_an_explicit_id_say_so() -> None:
    generated, given = JobSpecification("t"), JobSpecification("t", id="mine")
    assert generated.id_generated and not given.id_generated
    assert generated.stamped(1.0).id_generated and not generated.replace(id="x").id_generated
    assert not JobSpecification.from_message(generated.stamped(1.0).to_message()).id_generated


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_bodies_are_rejected_by_parser_and_schema_alike(body: str) -> None:
    with pytest.raises(SpecError):
        JobSpecification.from_message(body)
    try:
        data = json.loads(body)
    except ValueError:
        return
    assert not validator.is_valid(data)


def test_unserialisable_params_name_the_job() -> None:
    spec = JobSpecification("noop", {"when": object()}, id="job-7").stamped(1.0)
    with pytest.raises(SpecError, match="noop job-7"):
        spec.to_message()


@pytest.mark.parametrize(
    "kwargs",
    [{"release_at": 5, "delay": 5}, {"delay": -1}, {"domain": ""}, {"id": "has space"}],
)
def test_constructor_rejects_bad_options(kwargs: dict[str, Any]) -> None:
    with pytest.raises(SpecError):
        JobSpecification("noop", {}, **kwargs)


def test_naive_datetime_release_is_rejected() -> None:
    from datetime import datetime

    with pytest.raises(SpecError, match="timezone"):
        JobSpecification("noop", release_at=datetime(2030, 1, 1))


@pytest.mark.parametrize(
    ("enqueued_at", "accepted"),
    [
        ("2026-11-22T02:00:00Z", 1795312800.0),
        ("2026-11-22T02:00:00.5Z", 1795312800.5),
        ("1970-01-01T00:00:00Z", 0.0),
        ("1969-12-31T23:59:59Z", None),  # before 1970, as the number -1 is
        ("0001-01-01T00:00:00Z", None),
        ("2027-02-30T00:00:00Z", None),  # matches the pattern, and is no day
    ],
)
def test_an_enqueue_time_may_be_an_rfc_3339_utc_time_from_1970_on(enqueued_at: str, accepted: float | None) -> None:
    body = {"v": 1, "id": "j1", "type": "t", "params": {}, "enqueuedAt": enqueued_at}
    if accepted is None:
        with pytest.raises(SpecError, match="enqueuedAt"):
            JobSpecification.from_dict(body)
    else:
        assert JobSpecification.from_dict(body).enqueued_at == accepted
