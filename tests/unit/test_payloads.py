"""The payload bucket's pieces on moto's S3: the checked fetch names the
object in every error, an object that is not UTF-8 JSON of an object is
refused, and push uploads nothing for a job whose message would not fit even
with its params in the bucket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobkit.core.errors import SpecError
from jobkit.core.spec import JobSpecification
from jobkit.payloads.offload import fitted
from jobkit.payloads.reference import ParamsRef, params_bytes, params_from, reference_for
from jobkit.payloads.store import PayloadCorrupt, PayloadMissing, PayloadStore, PayloadUnavailable
from jobkit.sqs import MAX_JOB_BYTES, TYPE_ATTRIBUTE, string_attribute

BUCKET = "the-payloads"


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def stored(s3: Any, data: bytes) -> tuple[PayloadStore, ParamsRef]:
    store = PayloadStore(s3, BUCKET)
    ref = reference_for("render", "wiki", "job-1", data)
    store.put(ref, data)
    return store, ref


def test_a_stored_object_comes_back_as_it_went(s3: Any) -> None:
    data = params_bytes({"page": "Main Page", "blob": "x" * 10_000})
    store, ref = stored(s3, data)
    assert store.get(ref) == data
    assert params_from(store.get(ref), ref) == {"page": "Main Page", "blob": "x" * 10_000}


def test_a_missing_object_is_payload_missing_naming_its_key_and_bucket(s3: Any) -> None:
    ref = reference_for("render", "wiki", "job-1", b"{}")
    with pytest.raises(PayloadMissing, match=f"{ref.key} is not in the payload bucket {BUCKET}"):
        PayloadStore(s3, BUCKET).get(ref)


@pytest.mark.parametrize(
    ("held", "says"),
    [
        (b'{"page":"Main Pagf"}', "has the SHA-256"),  # the same size: only the hash tells
        (b'{"page":"Main"}', "holds 15 bytes; its reference says 20"),
        (b'{"page":"Main Page and more"}', "holds more than 20 bytes"),
    ],
)
def test_an_object_that_is_not_the_referenced_one_is_payload_corrupt_naming_it(s3: Any, held: bytes, says: str) -> None:
    store, ref = stored(s3, b'{"page":"Main Page"}')
    s3.put_object(Bucket=BUCKET, Key=ref.key, Body=held)
    with pytest.raises(PayloadCorrupt, match=says) as raised:
        store.get(ref)
    assert ref.key in str(raised.value)


def test_a_bucket_that_cannot_answer_is_unavailable_not_missing(s3: Any) -> None:
    ref = reference_for("render", "wiki", "job-1", b"{}")
    with pytest.raises(PayloadUnavailable, match=f"could not read its params object {ref.key}"):
        PayloadStore(s3, "no-such-bucket").get(ref)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b'{"page":"caf\xe9"}', "is not UTF-8 text"),
        (b"[1, 2]", "holds a JSON list, not an object"),
        (b'{"a": 1, "a": 2}', "has the key 'a' twice"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": "\\ud800"}', "lone UTF-16 surrogate"),
        (b"not json", "is not valid JSON"),
    ],
)
def test_an_object_that_is_not_utf8_json_of_an_object_is_refused_naming_it(data: bytes, says: str) -> None:
    ref = reference_for("render", "wiki", "job-1", data)
    with pytest.raises(SpecError, match=says) as raised:
        params_from(data, ref)
    assert f"its params object {ref.key}" in str(raised.value)


def test_push_uploads_nothing_for_a_job_whose_message_would_not_fit_even_so(s3: Any) -> None:
    spec = JobSpecification("render", {"blob": "x" * (2 * 1024 * 1024)}, domain="wiki").stamped(1_700_000_000.0)
    # attributes that leave no room even for the reference
    attributes = {TYPE_ATTRIBUTE: string_attribute("render"), "padding": string_attribute("p" * MAX_JOB_BYTES)}
    with pytest.raises(SpecError, match="over the"):
        fitted(spec, attributes, PayloadStore(s3, BUCKET), MAX_JOB_BYTES)
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_a_message_within_the_threshold_is_sent_as_it_is_and_nothing_is_uploaded(s3: Any) -> None:
    spec = JobSpecification("render", {"page": "Main Page"}, domain="wiki").stamped(1_700_000_000.0)
    body, size = fitted(spec, {TYPE_ATTRIBUTE: string_attribute("render")}, PayloadStore(s3, BUCKET), 1024)
    assert body == spec.to_message() and size < 1024
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_each_push_has_a_key_of_its_own_and_a_reference_must_name_its_jobs() -> None:
    from jobkit.payloads.reference import reference_body, reference_of

    first, second = (reference_for("render", "wiki/ü", "job-1", b"{}") for _ in range(2))
    assert first.key != second.key and first.sha256 == second.sha256
    assert first.key.startswith("params/render/=wiki%2F%C3%BC/job-1/" + first.sha256 + ".")
    body = reference_body({"v": 1, "id": "job-1", "type": "render", "domain": "wiki/ü", "enqueuedAt": 1.0}, first)
    assert reference_of(body) == first
    digits = first.key.rsplit(".", 2)[1]
    for key in (
        first.key.replace(digits, digits.upper()),  # the push's digits are lowercase hex
        first.key.replace(digits, digits[:-1]),  # sixteen of them
        first.key.replace(f".{digits}", ""),  # and there are some
        first.key.replace("=wiki%2F%C3%BC", "=wiki%2f%c3%bc"),  # percent-encoding in uppercase hex
        first.key.replace("job-1", "job-2"),  # another job's
    ):
        with pytest.raises(SpecError, match=r"paramsRef\.key must be the job's own key"):
            reference_of({**body, "paramsRef": {**first.to_wire(), "key": key}})


def test_an_ended_jobs_object_is_removed_and_a_fetch_then_says_the_job_ended(s3: Any) -> None:
    from jobkit.payloads.store import PayloadEnded

    store, ref = stored(s3, b'{"page":"Main Page"}')
    store.end(ref)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == [ref.key.replace(".json", ".ended")]
    with pytest.raises(PayloadEnded, match="was removed when its job ended"):
        store.get(ref)
