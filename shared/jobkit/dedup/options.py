"""The de-duplication keys of a job type (see :mod:`jobkit.dedup`)."""

from __future__ import annotations

from jobkit.declaration.options import TypeOption, Where, flag, str_list


def _param_names(where: Where, raw: object) -> tuple[str, ...]:
    return tuple(where.check(raw, str_list, "must be a list of param names"))


DEDUP_OPTIONS = (
    flag(
        "remove_duplicates",
        "skip a job when an identical one (same type, domain and params) started after it was enqueued"
        " and succeeded (MediaWiki's ignoreDuplicates)",
    ),
    TypeOption(
        "remove_duplicates_ignore_params",
        (),
        _param_names,
        "= []",
        "params left out of that comparison",
        to_toml=list,
    ),
    flag(
        "deliver_once",
        "claim each job ID before running, so a second delivery of the same message does not run it again"
        " (for jobs that are not idempotent)",
    ),
)
