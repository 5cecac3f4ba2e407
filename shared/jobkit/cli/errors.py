"""jobkit's and AWS's errors, as the CLI reports them: one line, exit status 1."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from jobkit.errors import JobKitError


@contextmanager
def clear_errors() -> Iterator[None]:
    """Turn jobkit's and AWS's errors into one-line messages and exit status 1."""
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    try:
        yield
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    except NoRegionError as exc:
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
