"""The job declaration: ``infra/jobs.toml``, loaded and validated.

The declaration is the single source of truth for job types. It drives the push
SDK's routing, the runner's class resolution (job classes are resolved only from
here, never from message content), the local stack and template.yaml.

Every problem is reported as a :class:`~jobkit.core.errors.ConfigError` that names
the file and the key, e.g. ``infra/jobs.toml: types.refreshLinks.max_attempts:
must be an integer from 1 to 1000 (SQS maxReceiveCount), got 0``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.batches.options import BATCH_OPTIONS, with_batch_callbacks
from jobkit.core.errors import ConfigError, SpecError, UnknownJobType
from jobkit.core.resources import (
    DEFAULT_PREFIX,
    PREFIX_PATTERN,
    RESERVED_TYPES,
    ResourceNames,
    refuse_names_aws_refuses,
    refuse_shared_logical_ids,
)
from jobkit.core.wire import TYPE_PATTERN
from jobkit.declaration.lanes import PRIORITY_OPTIONS, Lane, blamed, refuse_lane_names, share_lanes
from jobkit.declaration.options import TypeOption, Where, matches, no_unknown_keys, table
from jobkit.declaration.params_schema import PARAMS_OPTIONS, schemas_checked_on_use
from jobkit.declaration.queues import QueueConfig as QueueConfig  # re-exported: every module takes it from here
from jobkit.declaration.queues import queue_config
from jobkit.declaration.tracing import TRACING_OPTIONS
from jobkit.declaration.type_options import CORE_OPTIONS, Backoff
from jobkit.dedup.options import DEDUP_OPTIONS
from jobkit.flow.options import DOMAIN_KEY, FLOW_OPTIONS, ConcurrencyLimit, Debounce, FlowKey, RateLimit
from jobkit.payloads.options import PAYLOAD_OPTIONS
from jobkit.status.options import STATUS_OPTIONS

if TYPE_CHECKING:
    from jobkit.core.spec import JobSpecification
    from jobkit.declaration.params_schema import ParamsSchema
    from jobkit.declaration.schedules import Schedule
    from jobkit.endpoint.options import EndpointOptions

DEFAULT_PATH = Path("infra/jobs.toml")
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9_./#:-]{1,255}$")


@dataclass(frozen=True, slots=True)
class JobType:
    """One declared job type. Defaults are the documented ones in infra/jobs.toml."""

    name: str
    class_path: str
    queue: str
    max_attempts: int = 3
    timeout_s: int = 60
    memory_mb: int = 256
    batch_size: int = 10
    batch_window_s: int = 0
    max_concurrency: int = 8
    batch_concurrency: int = 1  # a batch's jobs that run at once (jobkit.runner.side_by_side)
    backoff: Backoff = field(default_factory=Backoff)
    remove_duplicates: bool = False
    remove_duplicates_ignore_params: tuple[str, ...] = ()
    deliver_once: bool = False
    track_status: bool = False
    cancellable: bool = False  # apps and operators may cancel its jobs (jobkit.status.cancel)
    batches: bool = False  # its jobs may be members of batches (jobkit.batches)
    batch_callback: bool = False  # a batch may push it when it ends
    pushes: tuple[str, ...] = ()
    log_level: str = "INFO"  # the least severe of the runner's lines about this type's jobs that are written
    fairness: FlowKey | None = DOMAIN_KEY  # the MessageGroupId of its messages (SQS fair queues); None: off
    concurrency: ConcurrencyLimit | None = None
    rate_limit: RateLimit | None = None
    debounce: Debounce | None = None
    max_held_s: int = 86400  # a job that a limit holds back longer than this is dead-lettered
    tracing: bool = False  # a span per job (X-Ray, through Powertools Tracer), linked to the producer's trace
    params_schema: ParamsSchema | None = None  # the shape of its params, checked at push and by the runner
    priorities: tuple[tuple[str, int], ...] = ()  # its queue's priority lanes and their concurrency
    offload_above_kb: int | None = None  # with a payload bucket: params of a larger message go there

    def check_params(self, job_id: str, params: Mapping[str, Any]) -> None:
        """Raise :class:`~jobkit.declaration.params_schema.InvalidParams` if ``params`` do not
        match the declared ``params_schema`` (a type without one takes any)."""
        if self.params_schema is not None:
            self.params_schema.check(self.name, job_id, params)

    def check_job(self, spec: JobSpecification, now: float) -> None:
        """Refuse a job of this type that a runner would dead-letter as poison:
        the one rule of what may be sent, which push (and through it the push
        endpoint) applies to every job and a schedule's declaration to its firings.

        Args:
            spec: the job as it will be sent (stamped with its enqueue time).
            now: the sender's clock (epoch seconds).

        Raises:
            SpecError: half or malformed root-job params, or a time no clock
                could have made (:meth:`JobSpecification.check_times`), naming the field.
            InvalidParams: params that break the type's ``params_schema``.
        """
        spec.check_root_job_params()
        spec.check_times(now)
        self.check_params(spec.id, spec.params)

    @property
    def limited(self) -> bool:
        """Whether a limit may hold its jobs back (a concurrency or rate limit)."""
        return self.concurrency is not None or self.rate_limit is not None


@dataclass(frozen=True, slots=True)
class Declaration:
    """All declared job types, and the names of the resources that serve them."""

    types: Mapping[str, JobType]
    prefix: str = DEFAULT_PREFIX
    namespace: str = "jobkit"
    code_dir: Path | None = None
    requirements: Path | None = None
    template: Path | None = None
    source: str = "<declaration>"
    schedules: Mapping[str, Schedule] = field(default_factory=dict)
    push_endpoint: EndpointOptions | None = None  # the HTTP push endpoint, when declared

    queues: Mapping[str, QueueConfig] = field(init=False)
    #: Every queue's lanes by :attr:`~jobkit.declaration.lanes.Lane.key` (a queue's own by its name).
    lanes: Mapping[str, Lane] = field(init=False)

    def __post_init__(self) -> None:
        by_queue: dict[str, list[JobType]] = {}
        for job_type in self.types.values():
            by_queue.setdefault(job_type.queue, []).append(job_type)
        queues = {name: queue_config(name, members) for name, members in sorted(by_queue.items())}
        object.__setattr__(self, "queues", queues)
        object.__setattr__(self, "lanes", {lane.key: lane for queue in queues.values() for lane in queue.lanes})

    def job_type(self, name: str) -> JobType:
        if name in self.types:
            return self.types[name]
        if self.source.startswith("$"):  # a function's own declaration, from its environment: a subset
            raise UnknownJobType(
                name,
                f"this function's declaration ({self.source}) holds only the types it serves and the types they"
                f' push: if [types.{name}] is declared in jobs.toml, add "{name}" to pushes of the type whose'
                " jobs push it",
            )
        raise UnknownJobType(name)

    def pushed_type(self, pusher: str, name: str) -> JobType:
        """The type ``name`` that a job of type ``pusher`` pushes. A runner's declaration holds only its
        queue's types and those they push (:meth:`for_runner`), so a target missing from the pusher's
        ``pushes`` is unknown there even when jobs.toml declares it.

        Raises:
            UnknownJobType: naming the type whose ``pushes`` lacks ``name``, and
                the line to add (the pushing job's attempt fails with it).
        """
        if name in self.types:
            return self.types[name]
        # A runner's declaration comes from its environment, which names no file.
        where = self.source if not self.source.startswith(("$", "<")) else "jobs.toml"
        raise UnknownJobType(
            name,
            f'[types.{pusher}] does not list it in pushes, so its runner does not know it: add "{name}" to'
            f" pushes of [types.{pusher}] in {where} (and declare [types.{name}] if it is not declared)",
        )

    def in_pushers_lane(self, pusher: JobSpecification | None, spec: JobSpecification) -> JobSpecification:
        """``spec`` as the job ``pusher`` (None: an app) pushes it: in its lane (:meth:`QueueConfig.in_lane`)."""
        job_type = self.types.get(spec.type)
        if pusher is None or job_type is None:
            return spec
        return self.queues[job_type.queue].in_lane(pusher.priority, spec)

    def lane(self, job_type: str, priority: str | None) -> Lane:
        """The lane of that priority (None: its own) of the queue of ``job_type``.

        Raises:
            SpecError: the queue has no lane of that priority, naming those it has (UnknownJobType: no such type).
        """
        queue = self.queues[self.job_type(job_type).queue]
        lane = queue.lane(priority)
        if lane is None:
            lanes = [f"{lane.priority!r}" for lane in queue.lanes[1:]]
            has = f"its lanes are {', '.join(lanes)}" if lanes else "it has none: declare priorities on its types"
            raise SpecError(f"{job_type}: no priority lane {priority!r} on queue {queue.name!r} ({has})")
        return lane

    @property
    def names(self) -> ResourceNames:
        """The names of the resources deployed under this declaration's prefix."""
        return ResourceNames(self.prefix)

    def queue_name(self, queue: str) -> str:  # the SQS queue name of a declared queue
        return self.names.queue(queue)

    def dlq_name(self, queue: str) -> str:
        return self.names.dlq(queue)

    @property
    def table_name(self) -> str:  # the DynamoDB table of every record
        return self.names.table

    def for_runner(self, queue: str) -> Declaration:
        """What the runner of ``queue`` knows: the queue's types, and the types
        their jobs push (to route those pushes). It runs only the first."""
        own = set(self.queues[queue].types)
        known = own | {target for name in own for target in self.types[name].pushes}
        types = {name: t for name, t in self.types.items() if name in known}
        return replace(self, types=types, schedules={}, push_endpoint=None)

    def for_endpoint(self) -> Declaration:
        """What the push endpoint knows: the types it takes."""
        if self.push_endpoint is None:
            raise ConfigError(self.source, "push_endpoint", "is not declared: add a [push_endpoint] table")
        taken = set(self.push_endpoint.types)
        return replace(self, types={n: t for n, t in self.types.items() if n in taken}, schedules={})

    def with_prefix(self, prefix: str) -> Declaration:
        """The same declaration deployed under another name prefix (a stage)."""
        where, expected = Where(self.source, "jobkit.prefix"), f"must match {PREFIX_PATTERN.pattern}"
        return replace(self, prefix=where.check(prefix, matches(PREFIX_PATTERN), expected))


# -- loading -----------------------------------------------------------------


def load_declaration(path: str | os.PathLike[str] | None = None) -> Declaration:
    """Load and validate a declaration file: ``path``, else ``$JOBKIT_CONFIG``, else ``infra/jobs.toml``."""
    import tomllib  # here: a runner reads its declaration as JSON, and its cold start skips the TOML parser

    resolved = Path(path or os.environ.get("JOBKIT_CONFIG") or DEFAULT_PATH)
    source = str(resolved)
    try:
        with resolved.open("rb") as handle:
            raw = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(source, "", "file not found (set JOBKIT_CONFIG or pass the path)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", f"not valid TOML: {exc}") from exc
    return parse_declaration(raw, source=source, base_dir=resolved.parent)


def declaration_from_environment(environ: Mapping[str, str] | None = None) -> Declaration:
    """The declaration an app or a runner is configured with:

    - ``JOBKIT_DECLARATION``: the declaration as JSON (what a runner function gets), or
    - ``JOBKIT_CONFIG``: a path to jobs.toml (default ``infra/jobs.toml``);
    - ``JOBKIT_PREFIX``: the deployed stack's prefix, if it is not the declaration's.
    """
    import json

    environ = os.environ if environ is None else environ
    if "JOBKIT_DECLARATION" in environ:
        try:
            raw = json.loads(environ["JOBKIT_DECLARATION"])
        except ValueError as exc:
            raise ConfigError("$JOBKIT_DECLARATION", "", f"not valid JSON: {exc}") from exc
        with schemas_checked_on_use():  # checked when the template was made: compiled for the first job
            declaration = parse_declaration(raw, source="$JOBKIT_DECLARATION")
    else:
        declaration = load_declaration(environ.get("JOBKIT_CONFIG"))
    prefix = environ.get("JOBKIT_PREFIX")
    return declaration.with_prefix(prefix) if prefix else declaration


def parse_declaration(raw: Mapping[str, Any], *, source: str, base_dir: Path | None = None) -> Declaration:
    """Validate an already-decoded declaration (a TOML document as a dict)."""
    top = Where(source, "", base_dir)
    no_unknown_keys(top, raw, ("jobkit", "defaults", "types", "schedules", "push_endpoint"))
    settings = table(top.at("jobkit"), raw.get("jobkit", {}))
    no_unknown_keys(top.at("jobkit"), settings, ("prefix", "namespace", "code_dir", "requirements", "template"))
    prefix = top.at("jobkit.prefix").check(
        settings.get("prefix", DEFAULT_PREFIX), matches(PREFIX_PATTERN), "must match " + PREFIX_PATTERN.pattern
    )
    namespace = top.at("jobkit.namespace").check(
        settings.get("namespace", "jobkit"), matches(NAMESPACE_PATTERN), "must be a CloudWatch namespace"
    )
    paths = {}
    for name in ("code_dir", "requirements", "template"):
        paths[name] = top.at(f"jobkit.{name}").check(
            settings.get(name), lambda v: v is None or isinstance(v, str), "must be a path string"
        )

    defaults = table(top.at("defaults"), raw.get("defaults", {}))
    no_unknown_keys(top.at("defaults"), defaults, (o.key for o in TYPE_OPTIONS if o.in_defaults))
    types_raw = table(top.at("types"), raw.get("types", {}))
    if not types_raw:
        raise ConfigError(source, "types", "declare at least one job type, e.g. [types.refreshLinks]")
    types = with_batch_callbacks(
        {
            name: _job_type(source, name, {**defaults, **table(top.at(f"types.{name}"), spec)}, base_dir)
            for name, spec in types_raw.items()
        }
    )
    types = share_lanes(types)
    for job_type in types.values():
        for target in job_type.pushes:
            if target not in types:
                raise ConfigError(source, f"types.{job_type.name}.pushes", f"names undeclared type {target!r}")
    refuse_shared_logical_ids(source, types, lambda name: f"types.{name}")
    named = {t.queue: t.name for t in sorted(types.values(), key=lambda t: t.name)}
    lanes = [lane for queue in Declaration(types).queues.values() for lane in queue.lanes]
    refuse_lane_names(source, lanes, named)
    refuse_shared_logical_ids(source, {lane.key: lane for lane in lanes}, lambda key: blamed(lanes, named, key))
    refuse_names_aws_refuses(source, named)
    schedules: Mapping[str, Schedule] = {}
    if "schedules" in raw:  # a runner's declaration has none: its cold start skips the module
        from jobkit.declaration.schedules import parse_schedules

        schedules = parse_schedules(source, raw["schedules"], types)
    push_endpoint = None
    if "push_endpoint" in raw:
        from jobkit.endpoint.options import parse_endpoint

        push_endpoint = parse_endpoint(source, raw["push_endpoint"], types)
    return Declaration(
        types=types,
        schedules=schedules,
        push_endpoint=push_endpoint,
        prefix=prefix,
        namespace=namespace,
        code_dir=(base_dir or Path(".")) / paths["code_dir"] if paths["code_dir"] else None,
        requirements=(base_dir or Path(".")) / paths["requirements"] if paths["requirements"] else None,
        template=(base_dir or Path(".")) / paths["template"] if paths["template"] else None,
        source=source,
    )


#: Every key of ``[types.NAME]``, in the order the reference lists them: the
#: core's, then each feature's (its module declares them).
TYPE_OPTIONS: tuple[TypeOption, ...] = (
    *CORE_OPTIONS,
    *DEDUP_OPTIONS,
    *STATUS_OPTIONS,
    *BATCH_OPTIONS,
    *FLOW_OPTIONS,
    *TRACING_OPTIONS,
    *PARAMS_OPTIONS,
    *PRIORITY_OPTIONS,
    *PAYLOAD_OPTIONS,
)


def _job_type(source: str, name: str, spec: Mapping[str, Any], base_dir: Path | None = None) -> JobType:
    where = Where(source, f"types.{name}", base_dir)
    where.check(name, matches(TYPE_PATTERN), "a type name must match " + TYPE_PATTERN.pattern)
    where.check(name, lambda v: v not in RESERVED_TYPES, f"{name} is jobkit's own type: rename it")
    no_unknown_keys(where, spec, (option.key for option in TYPE_OPTIONS))
    if "class" not in spec:
        raise where.error("is required: the job class as 'module:ClassName'", sub="class")
    values = {option.attribute: option.read(where, spec, name) for option in TYPE_OPTIONS}
    if values["batch_size"] > 10 and values["batch_window_s"] == 0:
        raise where.error("must be at least 1 when batch_size is over 10 (Lambda rule)", sub="batch_window_s")
    return JobType(name=name, **values)


# -- serialising ---------------------------------------------------------------


def declaration_to_dict(
    declaration: Declaration, *, only_types: set[str] | None = None, defaults: bool = True
) -> dict[str, Any]:
    """The declaration in its TOML shape (``parse_declaration`` reads it back).
    ``only_types`` keeps a subset (and drops ``pushes`` targets outside it), for
    a function's environment; ``defaults=False`` leaves out every key whose value
    is its default, which reads back the same (a function's environment is
    held to Lambda's 4 KB)."""
    types = {}
    for name, job_type in declaration.types.items():
        if only_types is not None and name not in only_types:
            continue
        keys: dict[str, Any] = {}
        for option in TYPE_OPTIONS:
            value = getattr(job_type, option.attribute)
            if option.key == "pushes" and only_types is not None:
                value = tuple(t for t in value if t in only_types)
            if not defaults and option.key != "class" and value == option.default_for(name):
                continue
            shown = option.to_toml(value)
            if shown is not None:
                keys[option.key] = shown
        types[name] = keys
    out: dict[str, Any] = {"jobkit": {"prefix": declaration.prefix, "namespace": declaration.namespace}, "types": types}
    if declaration.schedules and only_types is None:  # a runner's environment needs none
        from jobkit.declaration.schedules import schedules_to_dict

        out["schedules"] = schedules_to_dict(declaration.schedules)
    if declaration.push_endpoint is not None and only_types is None:
        out["push_endpoint"] = declaration.push_endpoint.to_dict()
    return out
