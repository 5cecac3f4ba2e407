"""The payload bucket: params objects uploaded by push, fetched by runners.

A fetch checks what it got against the reference: the object missing
(expired, deleted) and an object whose size or SHA-256 is not the
reference's are the job's end, with a reason that says which
(:class:`PayloadMissing`, :class:`PayloadCorrupt`: retrying cannot help); a
bucket that cannot answer now (throttled, an S3 error, the network) is
:class:`PayloadUnavailable`, retried like any transient error. An object its
runner removed when the job ended (it left a mark beside it) is
:class:`PayloadEnded`: the message is a late copy, acknowledged unrun.

On AWS, a ``GetObject`` of a key that does not exist answers 403, not 404,
unless the caller may also list the bucket: the template grants its runners
``s3:ListBucket`` on their types' prefixes, so a missing object is told from a
refused one. A 403 is taken as unavailable (a policy being fixed), not missing.
"""

from __future__ import annotations

import hashlib
from typing import Any

from jobkit.core.errors import JobKitError, SpecError
from jobkit.payloads.reference import ParamsRef, ended_key

#: S3 error codes of a key that holds no object.
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


class PayloadMissing(SpecError):
    """The params object is not in the bucket (expired by the lifecycle rule, or deleted)."""


class PayloadCorrupt(SpecError):
    """The params object is not the one the reference names (its size or SHA-256 differ)."""


class PayloadUnavailable(JobKitError):
    """The bucket did not answer now: retried like any transient error."""


class PayloadEnded(JobKitError):
    """The object is gone because its job ended (its runner marked it so, then removed it):
    this message is a late copy of a job that ran (SQS delivers at least once)."""


class PayloadStore:
    """Params objects in one bucket.

    Args:
        s3: an S3 client (the wiring's makes itself on the first request).
        bucket: the payload bucket's name (the template's ``PayloadBucket``).
    """

    def __init__(self, s3: Any, bucket: str) -> None:
        self._client, self.bucket = s3, bucket

    def put(self, ref: ParamsRef, data: bytes) -> None:
        """Upload a job's params (S3 checks the SHA-256 it is sent with)."""
        import base64

        self._client.put_object(
            Bucket=self.bucket,
            Key=ref.key,
            Body=data,
            ContentType="application/json",
            ChecksumSHA256=base64.b64encode(bytes.fromhex(ref.sha256)).decode("ascii"),
        )

    def end(self, ref: ParamsRef) -> None:
        """The job of ``ref`` ended: mark it so beside the object, then remove the object (S3
        bills storage, not deletes). The mark first: a late copy of the job's message that
        finds the object gone finds the mark, and is acknowledged, not dead-lettered."""
        self._client.put_object(Bucket=self.bucket, Key=ended_key(ref), Body=b"", ContentType="text/plain")
        self._client.delete_object(Bucket=self.bucket, Key=ref.key)

    def get(self, ref: ParamsRef) -> bytes:
        """A job's params, as uploaded.

        Raises:
            PayloadMissing: no object at the key.
            PayloadCorrupt: its size or SHA-256 is not the reference's.
            PayloadUnavailable: the bucket did not answer now.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self._client.get_object(Bucket=self.bucket, Key=ref.key)
            data = response["Body"].read(ref.size + 1)
        except ClientError as exc:
            code = _code(exc)
            if code in _MISSING:
                if self._ended(ref):
                    raise PayloadEnded(f"its params object {ref.key} was removed when its job ended") from exc
                raise PayloadMissing(
                    f"its params object {ref.key} is not in the payload bucket {self.bucket}"
                    " (expired by the bucket's lifecycle rule, or deleted)"
                ) from exc
            raise PayloadUnavailable(f"could not read its params object {ref.key}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise PayloadUnavailable(f"could not read its params object {ref.key}: {exc}") from exc
        if len(data) != ref.size:
            held = f"more than {ref.size}" if len(data) > ref.size else str(len(data))
            raise PayloadCorrupt(f"its params object {ref.key} holds {held} bytes; its reference says {ref.size}")
        digest = hashlib.sha256(data).hexdigest()
        if digest != ref.sha256:
            raise PayloadCorrupt(
                f"its params object {ref.key} has the SHA-256 {digest}, not the {ref.sha256} its reference says"
            )
        return bytes(data)

    def _ended(self, ref: ParamsRef) -> bool:
        """Whether the job of ``ref`` was marked ended (see :meth:`end`)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.head_object(Bucket=self.bucket, Key=ended_key(ref))
        except ClientError as exc:
            code = _code(exc)
            if code in _MISSING:
                return False
            raise PayloadUnavailable(f"could not read {ended_key(ref)}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise PayloadUnavailable(f"could not read {ended_key(ref)}: {exc}") from exc
        return True


def _code(error: Any) -> str:
    """A botocore ClientError's S3 error code ("NoSuchKey", "404", "SlowDown")."""
    return str(error.response.get("Error", {}).get("Code", ""))
