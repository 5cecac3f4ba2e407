"""The job declaration: ``infra/jobs.toml``, loaded and validated.

The declaration is the single source of truth for job types. It drives the
push SDK's routing, the runner's class resolution (job classes are resolved
only from here, never from message content), the local stack and
template.yaml.

Every problem is reported as a :class:`~jobkit.errors.ConfigError` that names
the file and the key, e.g. ``infra/jobs.toml: types.refreshLinks.max_attempts:
must be an integer from 1 to 1000 (SQS maxReceiveCount), got 0``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.errors import ConfigError, UnknownJobType
from jobkit.flow.options import (
    DOMAIN_KEY,
    ConcurrencyLimit,
    Debounce,
    FlowKey,
    RateLimit,
    flow_to_dict,
    parse_concurrency,
    parse_debounce,
    parse_fairness,
    parse_rate_limit,
)
from jobkit.resources import (
    CANARY_TYPE,
    DEFAULT_PREFIX,
    PREFIX_PATTERN,
    ResourceNames,
    refuse_names_aws_refuses,
    refuse_shared_logical_ids,
)
from jobkit.wire import TYPE_PATTERN

if TYPE_CHECKING:
    from jobkit.endpoint.options import EndpointOptions
    from jobkit.params_schema import ParamsSchema
    from jobkit.schedules import Schedule
    from jobkit.spec import JobSpecification

DEFAULT_PATH = Path("infra/jobs.toml")
CLASS_PATH_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
QUEUE_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,60}$")
#: Queue names whose SQS names jobkit's own queues take (``{prefix}-schedules-dlq``).
RESERVED_QUEUES = frozenset({"schedules"})
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9_./#:-]{1,255}$")


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry delay for attempt n (1-based): ``min(cap, base * factor**(n-1))``, of which
    the fraction ``jitter`` is random. ``jitter = 0.5`` is "equal jitter": the delay
    still grows with every attempt, but twins failing together spread out."""

    base_s: float = 10.0
    factor: float = 2.0
    cap_s: float = 900.0
    jitter: float = 0.5


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
    backoff: Backoff = field(default_factory=Backoff)
    remove_duplicates: bool = False
    remove_duplicates_ignore_params: tuple[str, ...] = ()
    deliver_once: bool = False
    track_status: bool = False
    pushes: tuple[str, ...] = ()
    log_level: str = "INFO"  # the least severe of the runner's lines about this type's jobs that are written
    fairness: FlowKey | None = DOMAIN_KEY  # the MessageGroupId of its messages (SQS fair queues); None: off
    concurrency: ConcurrencyLimit | None = None
    rate_limit: RateLimit | None = None
    debounce: Debounce | None = None
    max_held_s: int = 86400  # a job that a limit holds back longer than this is dead-lettered
    tracing: bool = False  # a span per job (X-Ray, through Powertools Tracer), linked to the producer's trace
    params_schema: ParamsSchema | None = None  # the shape of its params, checked at push and by the runner

    def check_params(self, job_id: str, params: Mapping[str, Any]) -> None:
        """Raise :class:`~jobkit.params_schema.InvalidParams` if ``params`` do not
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
class QueueConfig:
    """A queue and its runner function. Types that share a queue share its function,
    so it takes the largest timeout, memory, concurrency and attempt count of its
    types and the smallest batch size; the runner enforces each type's own
    ``max_attempts`` itself."""

    name: str
    types: tuple[str, ...]
    max_receive_count: int
    timeout_s: int
    memory_mb: int
    batch_size: int
    batch_window_s: int
    max_concurrency: int

    @property
    def visibility_timeout_s(self) -> int:
        # AWS: at least six times the function timeout, plus the batching window.
        return 6 * self.timeout_s + self.batch_window_s


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

    def __post_init__(self) -> None:
        by_queue: dict[str, list[JobType]] = {}
        for job_type in self.types.values():
            by_queue.setdefault(job_type.queue, []).append(job_type)
        queues = {name: _queue_config(name, members) for name, members in sorted(by_queue.items())}
        object.__setattr__(self, "queues", queues)

    def job_type(self, name: str) -> JobType:
        try:
            return self.types[name]
        except KeyError:
            pass
        if self.source.startswith("$"):  # a function's own declaration, from its environment: a subset
            raise UnknownJobType(
                name,
                f"this function's declaration ({self.source}) holds only the types it serves and the types they"
                f' push: if [types.{name}] is declared in jobs.toml, add "{name}" to pushes of the type whose'
                " jobs push it",
            )
        raise UnknownJobType(name)

    def pushed_type(self, pusher: str, name: str) -> JobType:
        """The type ``name`` that a job of type ``pusher`` pushes.

        A runner's declaration holds only its queue's types and the types they
        push (:meth:`for_runner`), on AWS as on the local stack, so a target
        missing from the pusher's ``pushes`` is unknown there even when
        jobs.toml declares it.

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

    @property
    def names(self) -> ResourceNames:
        """The names of the resources deployed under this declaration's prefix."""
        return ResourceNames(self.prefix)

    def queue_name(self, queue: str) -> str:
        """The SQS queue name of a declared queue."""
        return self.names.queue(queue)

    def dlq_name(self, queue: str) -> str:
        return self.names.dlq(queue)

    @property
    def table_name(self) -> str:
        """The DynamoDB table that holds dedup, root-job and failure records."""
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
        _check(self.source, "jobkit.prefix", prefix, _matches(PREFIX_PATTERN), "must match " + PREFIX_PATTERN.pattern)
        return replace(self, prefix=prefix)


def _queue_config(name: str, members: list[JobType]) -> QueueConfig:
    return QueueConfig(
        name=name,
        types=tuple(sorted(t.name for t in members)),
        max_receive_count=max(t.max_attempts for t in members),
        timeout_s=max(t.timeout_s for t in members),
        memory_mb=max(t.memory_mb for t in members),
        batch_size=min(t.batch_size for t in members),
        batch_window_s=max(t.batch_window_s for t in members),
        max_concurrency=max(t.max_concurrency for t in members),
    )


# -- loading -----------------------------------------------------------------


def load_declaration(path: str | os.PathLike[str] | None = None) -> Declaration:
    """Load and validate a declaration file.

    Args:
        path: the TOML file. Defaults to ``$JOBKIT_CONFIG``, else ``infra/jobs.toml``.
    """
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
        declaration = parse_declaration(raw, source="$JOBKIT_DECLARATION")
    else:
        declaration = load_declaration(environ.get("JOBKIT_CONFIG"))
    prefix = environ.get("JOBKIT_PREFIX")
    return declaration.with_prefix(prefix) if prefix else declaration


def parse_declaration(raw: Mapping[str, Any], *, source: str, base_dir: Path | None = None) -> Declaration:
    """Validate an already-decoded declaration (a TOML document as a dict)."""
    _no_unknown_keys(source, "", raw, {"jobkit", "defaults", "types", "schedules", "push_endpoint"})
    settings = _table(source, "jobkit", raw.get("jobkit", {}))
    _no_unknown_keys(source, "jobkit", settings, {"prefix", "namespace", "code_dir", "requirements", "template"})
    prefix = settings.get("prefix", DEFAULT_PREFIX)
    _check(source, "jobkit.prefix", prefix, _matches(PREFIX_PATTERN), "must match " + PREFIX_PATTERN.pattern)
    namespace = settings.get("namespace", "jobkit")
    _check(source, "jobkit.namespace", namespace, _matches(NAMESPACE_PATTERN), "must be a CloudWatch namespace")
    code_dir = settings.get("code_dir")
    _check(source, "jobkit.code_dir", code_dir, lambda v: v is None or isinstance(v, str), "must be a path string")
    requirements = settings.get("requirements")
    _check(
        source, "jobkit.requirements", requirements, lambda v: v is None or isinstance(v, str), "must be a path string"
    )
    template = settings.get("template")
    _check(source, "jobkit.template", template, lambda v: v is None or isinstance(v, str), "must be a path string")

    defaults = _table(source, "defaults", raw.get("defaults", {}))
    _no_unknown_keys(source, "defaults", defaults, _TYPE_KEYS - {"class", "queue", "pushes", "params_schema"})
    types_raw = _table(source, "types", raw.get("types", {}))
    if not types_raw:
        raise ConfigError(source, "types", "declare at least one job type, e.g. [types.refreshLinks]")
    types = {
        name: _job_type(source, name, {**defaults, **_table(source, f"types.{name}", spec)}, base_dir)
        for name, spec in types_raw.items()
    }
    for job_type in types.values():
        for target in job_type.pushes:
            if target not in types:
                raise ConfigError(source, f"types.{job_type.name}.pushes", f"names undeclared type {target!r}")
    refuse_shared_logical_ids(source, types, lambda name: f"types.{name}")
    refuse_shared_logical_ids(source, {t.queue for t in types.values()}, lambda _: "types.*.queue")
    refuse_names_aws_refuses(source, {t.queue: t.name for t in sorted(types.values(), key=lambda t: t.name)})
    from jobkit.schedules import parse_schedules

    schedules = parse_schedules(source, raw.get("schedules", {}), types)
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
        code_dir=(base_dir or Path(".")) / code_dir if code_dir else None,
        requirements=(base_dir or Path(".")) / requirements if requirements else None,
        template=(base_dir or Path(".")) / template if template else None,
        source=source,
    )


_TYPE_KEYS = {
    "class",
    "queue",
    "max_attempts",
    "timeout_s",
    "memory_mb",
    "batch_size",
    "batch_window_s",
    "max_concurrency",
    "backoff",
    "remove_duplicates",
    "remove_duplicates_ignore_params",
    "deliver_once",
    "track_status",
    "pushes",
    "log_level",
    "fairness",
    "concurrency",
    "rate_limit",
    "debounce",
    "max_held_s",
    "tracing",
    "params_schema",
}

#: The levels a type's ``log_level`` may name.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _job_type(source: str, name: str, spec: Mapping[str, Any], base_dir: Path | None = None) -> JobType:
    key = f"types.{name}"
    _check(source, key, name, _matches(TYPE_PATTERN), "a type name must match " + TYPE_PATTERN.pattern)
    _check(source, key, name, lambda v: v != CANARY_TYPE, f"{CANARY_TYPE} is jobkit verify's own type: rename it")
    _no_unknown_keys(source, key, spec, _TYPE_KEYS)
    if "class" not in spec:
        raise ConfigError(source, f"{key}.class", "is required: the job class as 'module:ClassName'")

    def get(option: str, default: Any, ok: Callable[[Any], bool], expected: str) -> Any:
        value = spec.get(option, default)
        _check(source, f"{key}.{option}", value, ok, expected)
        return value

    batch_size = get("batch_size", 10, _int_in(1, 10000), "must be an integer from 1 to 10000")
    batch_window_s = get("batch_window_s", 0, _int_in(0, 300), "must be an integer from 0 to 300")
    if batch_size > 10 and batch_window_s == 0:
        raise ConfigError(
            source, f"{key}.batch_window_s", "must be at least 1 when batch_size is over 10 (Lambda rule)"
        )
    return JobType(
        name=name,
        class_path=get("class", None, _matches(CLASS_PATH_PATTERN), "must be 'module.path:ClassName'"),
        queue=get(
            "queue",
            name,
            lambda v: _matches(QUEUE_PATTERN)(v) and v not in RESERVED_QUEUES and not v.endswith("-dlq"),
            f"must match {QUEUE_PATTERN.pattern}, not end in -dlq (a DLQ's name), and not be"
            f" {' or '.join(sorted(RESERVED_QUEUES))} (jobkit's own)",
        ),
        max_attempts=get(
            "max_attempts", 3, _int_in(1, 1000), "must be an integer from 1 to 1000 (SQS maxReceiveCount)"
        ),
        timeout_s=get("timeout_s", 60, _int_in(1, 900), "must be an integer from 1 to 900 (Lambda limit)"),
        memory_mb=get("memory_mb", 256, _int_in(128, 10240), "must be an integer from 128 to 10240"),
        batch_size=batch_size,
        batch_window_s=batch_window_s,
        max_concurrency=get("max_concurrency", 8, _int_in(2, 1000), "must be an integer from 2 to 1000 (Lambda limit)"),
        backoff=_backoff(source, f"{key}.backoff", spec.get("backoff", {})),
        remove_duplicates=get("remove_duplicates", False, _is_bool, "must be true or false"),
        remove_duplicates_ignore_params=tuple(
            get("remove_duplicates_ignore_params", [], _str_list, "must be a list of param names")
        ),
        deliver_once=get("deliver_once", False, _is_bool, "must be true or false"),
        track_status=get("track_status", False, _is_bool, "must be true or false"),
        pushes=tuple(get("pushes", [], _str_list, "must be a list of job type names")),
        log_level=get("log_level", "INFO", _is_log_level, "must be one of " + ", ".join(LOG_LEVELS)).upper(),
        fairness=parse_fairness(source, f"{key}.fairness", spec.get("fairness", "domain")),
        concurrency=parse_concurrency(source, f"{key}.concurrency", spec.get("concurrency")),
        rate_limit=parse_rate_limit(source, f"{key}.rate_limit", spec.get("rate_limit")),
        debounce=parse_debounce(source, f"{key}.debounce", spec.get("debounce")),
        max_held_s=get(
            "max_held_s", 86400, _int_in(60, 1209600), "must be an integer from 60 to 1209600 (SQS's 14 days)"
        ),
        tracing=get("tracing", False, _is_bool, "must be true or false"),
        params_schema=_params_schema(source, f"{key}.params_schema", spec.get("params_schema"), base_dir),
    )


def _params_schema(source: str, key: str, raw: Any, base_dir: Path | None) -> ParamsSchema | None:
    if raw is None:
        return None
    from jobkit.params_schema import parse_params_schema

    return parse_params_schema(source, key, raw, base_dir)


def _backoff(source: str, key: str, raw: Any) -> Backoff:
    table = _table(source, key, raw)
    _no_unknown_keys(source, key, table, {"base_s", "factor", "cap_s", "jitter"})
    checks = {
        "base_s": (_num_in(0, 43200), "must be a number of seconds from 0 to 43200"),
        "factor": (_num_in(1, 100), "must be a number from 1 to 100"),
        "cap_s": (_num_in(0, 43200), "must be a number of seconds from 0 to 43200 (SQS visibility limit)"),
        "jitter": (_num_in(0, 1), "must be a fraction from 0 to 1"),
    }
    values = {}
    for option, (ok, expected) in checks.items():
        if option in table:
            _check(source, f"{key}.{option}", table[option], ok, expected)
            values[option] = float(table[option])
    return Backoff(**values)


# -- validation helpers --------------------------------------------------------


def _table(source: str, key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(source, key, f"must be a table, got {type(value).__name__}")
    return value


def _no_unknown_keys(source: str, key: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    for name in table:
        if name not in allowed:
            where = f"{key}.{name}" if key else name
            raise ConfigError(source, where, f"unknown key (allowed: {', '.join(sorted(allowed))})")


def _check(source: str, key: str, value: Any, ok: Callable[[Any], bool], expected: str) -> None:
    if not ok(value):
        raise ConfigError(source, key, f"{expected}, got {value!r}")


def _matches(pattern: re.Pattern[str]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, str) and bool(pattern.fullmatch(v))


def _int_in(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _num_in(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high


def _is_log_level(value: Any) -> bool:
    return isinstance(value, str) and value.upper() in LOG_LEVELS


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# -- serialising ---------------------------------------------------------------


def declaration_to_dict(declaration: Declaration, *, only_types: set[str] | None = None) -> dict[str, Any]:
    """The declaration in its TOML shape (``parse_declaration`` reads it back),
    with every default spelled out. ``only_types`` keeps a subset (and drops
    ``pushes`` targets outside it), for a runner's environment."""
    types = {}
    for name, job_type in declaration.types.items():
        if only_types is not None and name not in only_types:
            continue
        types[name] = {
            "class": job_type.class_path,
            "queue": job_type.queue,
            "max_attempts": job_type.max_attempts,
            "timeout_s": job_type.timeout_s,
            "memory_mb": job_type.memory_mb,
            "batch_size": job_type.batch_size,
            "batch_window_s": job_type.batch_window_s,
            "max_concurrency": job_type.max_concurrency,
            "backoff": {
                "base_s": job_type.backoff.base_s,
                "factor": job_type.backoff.factor,
                "cap_s": job_type.backoff.cap_s,
                "jitter": job_type.backoff.jitter,
            },
            "remove_duplicates": job_type.remove_duplicates,
            "remove_duplicates_ignore_params": list(job_type.remove_duplicates_ignore_params),
            "deliver_once": job_type.deliver_once,
            "track_status": job_type.track_status,
            "pushes": [t for t in job_type.pushes if only_types is None or t in only_types],
            "log_level": job_type.log_level,
            **flow_to_dict(job_type.fairness, job_type.concurrency, job_type.rate_limit, job_type.debounce),
            "max_held_s": job_type.max_held_s,
            "tracing": job_type.tracing,
            **({"params_schema": job_type.params_schema.document} if job_type.params_schema is not None else {}),
        }
    out: dict[str, Any] = {"jobkit": {"prefix": declaration.prefix, "namespace": declaration.namespace}, "types": types}
    if declaration.schedules and only_types is None:  # a runner's environment needs none
        from jobkit.schedules import schedules_to_dict

        out["schedules"] = schedules_to_dict(declaration.schedules)
    if declaration.push_endpoint is not None and only_types is None:
        out["push_endpoint"] = declaration.push_endpoint.to_dict()
    return out
