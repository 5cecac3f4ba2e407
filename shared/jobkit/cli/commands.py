"""The ``jobkit`` group and its development commands: ``demo``, ``template``, ``schema`` and ``local up``.

The ops commands (:mod:`jobkit.cli.ops`) are added to the group here too.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from jobkit.cli.demo import demo
from jobkit.cli.ops import register_ops_commands
from jobkit.cli.options import config_option
from jobkit.core.errors import JobKitError
from jobkit.declaration.config import Declaration, load_declaration


@click.group()
@click.version_option(package_name="jobkit-aws")
def main() -> None:
    """jobkit: a serverless job queue on SQS, Lambda and DynamoDB."""


main.add_command(demo)


@main.command()
@config_option
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the template goes (default: the declaration's [jobkit] template, else template.yaml).",
)
@click.option(
    "--extra",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Your own resources, merged in if it exists (default: template-extra.yaml beside the declaration).",
)
@click.option(
    "--check",
    is_flag=True,
    help=(
        "Exit 1 if the files differ from what would be generated, a declared class does not import,"
        " or a class obviously pushes a type missing from its type's pushes."
    ),
)
def template(config_path: Path | None, output: Path | None, extra: Path | None, check: bool) -> None:
    """Render template.yaml (SAM), and the Makefile `sam build` runs, from the job declaration."""
    from jobkit.sam.check import check_classes
    from jobkit.template.stacks import INLINE_QUEUES

    try:
        declaration = load_declaration(config_path)
        output = output or declaration.template or Path("template.yaml")
        extra = extra or Path(declaration.source).parent / "template-extra.yaml"
        files = _generated_files(declaration, output, extra)
        if check:
            check_classes(declaration)
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    if check:
        missing = [str(path) for path in files if not path.exists()]
        if missing:
            raise click.ClickException(
                f"{' and '.join(missing)} not found: run `jobkit template` and commit the result"
            )
        stale = [str(path) for path, text in files.items() if path.read_text() != text]
        if stale:
            verb = "is" if len(stale) == 1 else "are"
            raise click.ClickException(
                f"{' and '.join(stale)} {verb} stale: run `jobkit template` and commit the result"
            )
        click.echo(f"{output} is up to date, and every declared class imports")
        return
    if _moves_queues_into_nested_stacks(output, files.get(output, "")):
        click.echo(
            f"jobkit: {output} now puts the queues into nested stacks (over {INLINE_QUEUES} queues and priority"
            " lanes): deploying it to a stack that holds them inline replaces every queue (CloudFormation cannot"
            " move a resource between stacks). Drain the queues and DLQs first, or deploy under a new prefix;"
            " see docs/deploy.md",
            err=True,
        )
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        click.echo(f"wrote {path}")


def _moves_queues_into_nested_stacks(output: Path, new_text: str) -> bool:
    """Whether writing ``new_text`` over ``output`` moves an inline template's queues into nested stacks."""
    nested = "AWS::Serverless::Application"
    if not output.exists() or nested not in new_text:
        return False
    old_text = output.read_text()
    return "AWS::SQS::Queue" in old_text and nested not in old_text


@main.command()
@config_option
@click.option(
    "--from-class",
    is_flag=True,
    help="Print the schema derived from the job class's Params TypedDict instead, to save as its params_schema.",
)
@click.argument("job_type", metavar="TYPE")
def schema(config_path: Path | None, from_class: bool, job_type: str) -> None:
    """Print TYPE's params schema (JSON Schema), for producers to check params before sending.

    A type without a declared params_schema takes any JSON object: that is what
    is printed then, with a note on stderr.
    """
    import json

    from jobkit.declaration.params_schema import DEFAULT_DRAFT

    try:
        declaration = load_declaration(config_path)
        declared = declaration.job_type(job_type)
        if from_class:
            click.echo(json.dumps(_derived_schema(declaration, job_type), indent=2, ensure_ascii=False))
            return
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    if declared.params_schema is None:
        click.echo(f"{job_type} declares no params_schema: its params may be any JSON object", err=True)
        document: dict[str, object] = {"type": "object"}
    else:
        document = declared.params_schema.document
    click.echo(json.dumps({"$schema": DEFAULT_DRAFT, **document}, indent=2, ensure_ascii=False))


def _derived_schema(declaration: Declaration, job_type: str) -> dict[str, object]:
    """The schema of the type's class's ``Params``, imported from where its runner imports it."""
    from jobkit.core.params_types import schema_of_class
    from jobkit.runner.registry import JobRegistry
    from jobkit.sam.runner import code_root

    root = str(code_root(declaration).resolve())
    sys.path.insert(0, root)
    try:
        return schema_of_class(JobRegistry(declaration).resolve(job_type))
    finally:
        sys.path.remove(root)


def _generated_files(declaration: Declaration, output: Path, extra: Path) -> dict[Path, str]:
    """What ``jobkit template`` writes: the template (and its nested stacks',
    beside it, when the declaration has more queues than one stack holds), and
    the Makefile ``sam build`` runs."""
    import jobkit
    from jobkit.sam.makefile import makefile_path, makefile_text
    from jobkit.template import load_extra, render_all

    templates = render_all(declaration, load_extra(extra), base_dir=output.parent, template_name=output.name)
    return {
        **{output.parent / name: text for name, text in templates.items()},
        makefile_path(declaration): makefile_text(declaration, jobkit.__version__),
    }


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@click.option("--package", default="jobs", show_default=True, help="The jobs package to create (e.g. myapp.jobs).")
@click.option("--prefix", default=None, help="Resource name prefix (default: from the directory's name).")
@click.option(
    "--template",
    "template_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("template.yaml"),
    show_default=True,
    help="Where the SAM template goes, relative to DIRECTORY.",
)
def init(directory: Path, package: str, prefix: str | None, template_path: Path) -> None:
    """Scaffold a jobs project in an app's repo (DIRECTORY, default: here); overwrites nothing."""
    from jobkit.scaffold import DECLARATION, plan, write

    def generate() -> dict[Path, str]:
        declaration = load_declaration(directory / DECLARATION)
        extra = directory / DECLARATION.parent / "template-extra.yaml"
        return _generated_files(declaration, directory / template_path, extra)

    try:
        scaffold = plan(directory, package=package, template=template_path, prefix=prefix)
        created = write(directory, scaffold, generate)
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    for path in created:
        click.echo(f"  created {path.as_posix()}")
    if scaffold.pytest_hint:
        click.echo(f"  not changed: {scaffold.pytest_hint}")
    click.echo("next: read JOBS.md; run the example job's tests with `pytest tests/test_jobs.py`")


@main.group()
def local() -> None:
    """The embedded local AWS (moto) with the declared queues and table."""


@local.command("up")
@config_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on (keep it loopback).")
@click.option("--port", default=4566, show_default=True, help="Port to serve on; 0 picks a free one.")
@click.option(
    "--template",
    "template_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help=(
        "Deploy the stack from this SAM template, as `sam deploy` would (its functions, event source mappings"
        " and alarms too, for `jobkit verify`), instead of from the declaration alone. Slower to start."
    ),
)
@click.option(
    "--job-log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="The least severe of a job's own log lines (its `logging` calls) that are printed, after its type and ID.",
)
def local_up(config_path: Path | None, host: str, port: int, template_path: Path | None, job_log_level: str) -> None:
    """Serve the AWS API locally and run jobs as apps push them, until Ctrl-C."""
    from jobkit.local.serve import serve

    # jobkit's own lines and the libraries' are not printed (but a critical one):
    # each job's outcome is, and the job's own lines (jobkit.local.serve.JobLinePrinter)
    critical = logging.StreamHandler()
    critical.setLevel(logging.CRITICAL)
    logging.basicConfig(level=logging.CRITICAL, handlers=[critical])
    try:
        declaration = load_declaration(config_path)
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc

    def emit(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()  # one line per job, promptly, even into a pipe

    try:
        level = logging.getLevelName(job_log_level.upper())
        serve(declaration, host=host, port=port, emit=emit, template=template_path, job_log_level=level)
    except JobKitError as exc:  # a port in use, say: one line, at once
        raise click.ClickException(str(exc)) from exc


@local.command("advance")
@click.argument("duration")
@click.option(
    "--endpoint-url",
    envvar="AWS_ENDPOINT_URL",
    default="http://127.0.0.1:4566",
    show_default=True,
    help="The local stack's endpoint [$AWS_ENDPOINT_URL].",
)
def local_advance(duration: str, endpoint_url: str) -> None:
    """Move a running `jobkit local up`'s clock DURATION forward (90s, 15m, 2h, 1d, 1h30m).

    Delayed jobs, retry backoffs, holds, debounce waits and schedules that fall
    due in that time run at once, as if the time had passed; the ops commands
    pointed at the stack read its clock.
    """
    from datetime import UTC, datetime

    from jobkit.ops.local_endpoint import advance, parse_duration

    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="DURATION") from exc
    try:
        now = advance(endpoint_url, seconds)
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    click.echo(f"the local stack's clock moved {duration} ({seconds:g} s) forward: it is now {stamp}")


register_ops_commands(main)
