"""The core keys of a job type: its class, its queue and runner function,
retries, the types it pushes and its log level. Each feature declares its own
keys beside it (:mod:`jobkit.dedup.options`, :mod:`jobkit.status.options`,
:mod:`jobkit.flow.options`, :mod:`jobkit.declaration.tracing`, :mod:`jobkit.declaration.params_schema`);
:mod:`jobkit.declaration.config` composes them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobkit.declaration.options import TypeOption, Where, int_in, matches, no_unknown_keys, num_in, str_list, table

CLASS_PATH_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
QUEUE_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,60}$")
#: Queue names whose SQS names jobkit's own queues take (``{prefix}-schedules-dlq``).
RESERVED_QUEUES = frozenset({"schedules"})


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry delay for attempt n (1-based): ``min(cap, base * factor**(n-1))``, of which
    the fraction ``jitter`` is random. ``jitter = 0.5`` is "equal jitter": the delay
    still grows with every attempt, but twins failing together spread out."""

    base_s: float = 10.0
    factor: float = 2.0
    cap_s: float = 900.0
    jitter: float = 0.5


#: The levels a type's ``log_level`` may name.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _integer(low: int, high: int, expected: str) -> Callable[[Where, Any], Any]:
    return lambda where, raw: where.check(raw, int_in(low, high), expected)


def _backoff(where: Where, raw: Any) -> Backoff:
    found = table(where, raw)
    no_unknown_keys(where, found, ("base_s", "factor", "cap_s", "jitter"))
    checks = {
        "base_s": (num_in(0, 43200), "must be a number of seconds from 0 to 43200"),
        "factor": (num_in(1, 100), "must be a number from 1 to 100"),
        "cap_s": (num_in(0, 43200), "must be a number of seconds from 0 to 43200 (SQS visibility limit)"),
        "jitter": (num_in(0, 1), "must be a fraction from 0 to 1"),
    }
    values = {}
    for option, (ok, expected) in checks.items():
        if option in found:
            values[option] = float(Where(where.source, f"{where.key}.{option}").check(found[option], ok, expected))
    return Backoff(**values)


def _queue(where: Where, raw: Any) -> str:
    return str(
        where.check(
            raw,
            lambda v: matches(QUEUE_PATTERN)(v) and v not in RESERVED_QUEUES and not v.endswith("-dlq"),
            f"must match {QUEUE_PATTERN.pattern}, not end in -dlq (a DLQ's name), and not be"
            f" {' or '.join(sorted(RESERVED_QUEUES))} (jobkit's own)",
        )
    )


#: The keys every type has: its class, its queue and function, retries, pushes and logs.
CORE_OPTIONS = (
    TypeOption(
        "class",
        None,
        lambda where, raw: where.check(raw, matches(CLASS_PATH_PATTERN), "must be 'module.path:ClassName'"),
        "(required)",
        '"module.path:ClassName", a subclass of jobkit.Job, importable from code_dir',
        field="class_path",
        in_defaults=False,
    ),
    TypeOption(
        "queue",
        None,
        _queue,
        "= NAME",
        'the queue that carries the type; rare types may share one (e.g. "lowTraffic")',
        in_defaults=False,
        default_is_name=True,
    ),
    TypeOption(
        "max_attempts",
        3,
        _integer(1, 1000, "must be an integer from 1 to 1000 (SQS maxReceiveCount)"),
        "= 3",
        "tries before the job is dead-lettered (MediaWiki's maxTries; the queue's redrive maxReceiveCount)",
    ),
    TypeOption(
        "timeout_s",
        60,
        _integer(1, 900, "must be an integer from 1 to 900 (Lambda limit)"),
        "= 60",
        "runner function timeout, 1..900",
    ),
    TypeOption(
        "memory_mb",
        256,
        _integer(128, 10240, "must be an integer from 128 to 10240"),
        "= 256",
        "runner function memory, 128..10240",
    ),
    TypeOption(
        "batch_size",
        10,
        _integer(1, 10000, "must be an integer from 1 to 10000"),
        "= 10",
        "messages per invocation, 1..10000 (over 10 needs batch_window_s >= 1)",
    ),
    TypeOption(
        "batch_window_s",
        0,
        _integer(0, 300, "must be an integer from 0 to 300"),
        "= 0",
        "MaximumBatchingWindowInSeconds, 0..300",
    ),
    TypeOption(
        "max_concurrency",
        8,
        _integer(2, 1000, "must be an integer from 2 to 1000 (Lambda limit)"),
        "= 8",
        "the event source mapping's MaximumConcurrency, 2..1000",
    ),
    TypeOption(
        "batch_concurrency",
        1,
        _integer(1, 100, "must be an integer from 1 to 100"),
        "= 1",
        "jobs of one batch run at once, on threads (for jobs that wait on the network): 1 runs them one"
        " after another; jobs with root params run after the others, in order",
    ),
    TypeOption(
        "backoff",
        Backoff(),
        _backoff,
        "= { base_s = 10, factor = 2.0, cap_s = 900, jitter = 0.5 }",
        "retry n waits min(cap_s, base_s * factor^(n-1)) seconds, of which the fraction `jitter` is random",
        to_toml=lambda b: {"base_s": b.base_s, "factor": b.factor, "cap_s": b.cap_s, "jitter": b.jitter},
    ),
    TypeOption(
        "pushes",
        (),
        lambda where, raw: tuple(where.check(raw, str_list, "must be a list of job type names")),
        "= []",
        "job types this type's jobs may push (its runner may send to their queues) and no others: its runner"
        " knows no other type, and such a push fails",
        to_toml=list,
        in_defaults=False,
    ),
    TypeOption(
        "log_level",
        "INFO",
        lambda where, raw: str(
            where.check(
                raw, lambda v: isinstance(v, str) and v.upper() in LOG_LEVELS, "must be one of " + ", ".join(LOG_LEVELS)
            )
        ).upper(),
        '= "INFO"',
        "the least severe of the runner's lines about this type's jobs that are written: \"WARNING\" leaves out"
        " the one INFO line per successful job (and its skips); failures are WARNING and ERROR (DEBUG adds the"
        " params)",
    ),
)
