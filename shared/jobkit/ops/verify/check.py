"""The verdict of ``jobkit verify``: one line a check, and what stops it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Check:
    """One line of the verdict."""

    name: str
    queue: str | None
    ok: bool
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.name, "queue": self.queue, "ok": self.ok, "detail": self.detail, **self.figures}


class VerifyRefused(Exception):
    """What verify cannot do at all (no queue there, a permission refused): one line, exit 2."""


@dataclass
class Clients:
    """What verify talks to (built by the CLI's composition root)."""

    sqs: Any
    lambda_: Any
    cloudwatch: Any
    records: Any  # jobkit.records.store.Records


def call(permission: str, request: Callable[[], Any], what: str = "") -> Any:
    """Make one request verify cannot go on without: a refusal is :class:`VerifyRefused`."""
    try:
        return request()
    except VerifyRefused:
        raise
    except Exception as exc:
        raise VerifyRefused(refused(exc, permission, what)) from exc


def refused(exc: BaseException, permission: str, what: str) -> str:
    """One line for a refused request: what to do when AWS said why (an error of
    the jobs table's store carries AWS's as its cause)."""
    cause = exc if hasattr(exc, "response") else exc.__cause__
    code = getattr(cause, "response", {}).get("Error", {}).get("Code") if cause is not None else None
    if code in ("AccessDenied", "AccessDeniedException", "AccessDeniedException.Unauthorized"):
        return f"{permission} was refused{' on ' + what if what else ''}: attach the stack's OperatorPolicy"
    if code in ("ResourceNotFoundException", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
        return f"{what or 'the resource'} does not exist: is the stack deployed under this prefix and region?"
    return f"{type(exc).__name__}: {exc}"
