"""jobkit's and AWS's errors, as the CLI reports them: one line on stderr.

Without ``--json``, an error is one plain line, ``Error: <message>`` (click's
usage errors add their usage lines above it). With ``--json``, an ops command
reports it as one JSON object on stderr instead, with nothing on stdout::

    {"error": "<the one-line message>", "exit_status": 1}

``exit_status`` is the process's exit status: ``1`` when the command failed
(jobkit's errors, AWS's, nothing found, a declined confirmation), ``2`` when it
was used wrongly (an unknown option, a bad option value). These two keys are
the whole shape: scripts may rely on them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click

from jobkit.core.errors import JobKitError, NoRegion

#: The exit status of a command used wrongly, as click's own usage errors.
USAGE = 2


class OptionError(click.ClickException):
    """A bad option or environment value: one line (no usage text), exit status 2."""

    exit_code = USAGE


class JsonError(click.ClickException):
    """An error reported as ``{"error": ..., "exit_status": 1}`` on stderr."""

    def to_json(self) -> dict[str, object]:
        return {"error": self.message, "exit_status": self.exit_code}

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(json.dumps(self.to_json(), ensure_ascii=False), file=file, err=True)


class JsonUsageError(JsonError):
    """A usage error reported as ``{"error": ..., "exit_status": 2}`` on stderr."""

    exit_code = USAGE


def json_error(exc: click.ClickException | click.Abort) -> JsonError:
    """``exc`` as a :class:`JsonError`, with its message and exit status (1, or 2 for usage)."""
    if isinstance(exc, JsonError):
        return exc
    if isinstance(exc, click.Abort):
        return JsonError("aborted")
    return (JsonUsageError if exc.exit_code == USAGE else JsonError)(exc.format_message())


@contextmanager
def clear_errors() -> Iterator[None]:
    """Turn jobkit's and AWS's errors into one-line messages and exit status 1."""
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    try:
        yield
    except NoRegion as exc:
        raise click.ClickException(f"{exc}, or pass --region") from exc
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    except NoRegionError as exc:  # a client made elsewhere than jobkit's AwsClients
        raise click.ClickException("no AWS region: pass --region or set AWS_REGION") from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "ClientError")
        hint = ""
        if "NonExistentQueue" in code or code == "QueueDoesNotExist":
            hint = " (is the prefix right? --prefix or $JOBKIT_PREFIX)"
        raise click.ClickException(f"AWS {exc.operation_name}: {code}: {error.get('Message', exc)}{hint}") from exc
    except BotoCoreError as exc:
        raise click.ClickException(f"AWS: {exc}") from exc
