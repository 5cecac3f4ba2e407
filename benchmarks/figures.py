"""The measured figures the README and the docs quote outside the benchmark
table, rendered from ``benchmarks/results/latest.json``.

Each sits between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in
its file. ``make bench`` rewrites them with the table (``run.py --docs``);
``tests/unit/test_docs_figures.py`` fails when one is not what the current
results render, so no figure from an older run stays behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LATEST = ROOT / "benchmarks" / "results" / "latest.json"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} minute{'s' if round(seconds / 60) != 1 else ''}"


def bench_time(r: dict[str, Any]) -> str:
    return f"about {_minutes(r['wall_s'])}, of which {_minutes(r['soak']['wall_s'])} are the 50,000-job soak"


def soak_sentence(r: dict[str, Any]) -> str:
    s = r["soak"]
    return (
        f"`make soak` pushes {s['jobs']:,} jobs through the local stack with {s['fault_rate']:.0%} of SQS and\n"
        f"DynamoDB calls failing: {s['pushed']:,} jobs with their fan-out, {s['lost']} lost, every one of the\n"
        f"{s['dead_letter_copies']:,} DLQ messages explained ({_minutes(s['wall_s'])} on this 2-core machine)."
    )


def soak_table(r: dict[str, Any]) -> str:
    s = r["soak"]
    faults = s["faults_injected"]
    listed = ", ".join(f"{name} {count:,}" for name, count in sorted(faults.items()))
    rows = [
        ("pushed (distinct IDs SQS accepted, with the fan-out)", s["pushed"]),
        ("succeeded", s["succeeded"]),
        ("duplicate", s["duplicate"]),
        ("superseded", s["superseded"]),
        ("dead-lettered", s["dead_lettered"]),
    ]
    lines = ["| | jobs |", "|---|---:|", *(f"| {name} | {count:,} |" for name, count in rows)]
    lines.append(f"| **lost** | **{s['lost']:,}** |")
    lines += [
        "",
        f"Faults injected: {sum(faults.values()):,} ({listed}). {s['dead_letter_copies']:,} DLQ messages:",
        f"{s['dead_letters_redriven']:,} moved by the redrive policy, every one explained by the jobs table, and",
        f"{s['dead_and_done']:,} redundant copies of jobs that also finished after lost deletes. Queues",
        f"{'empty' if s['queues_empty'] else 'NOT EMPTY'} at the end. Wall time {s['wall_s']:.0f} s on this 2-core"
        " machine (measured",
        f"{r['date']} by `make bench`).",
    ]
    return "\n".join(lines)


def local_stack_table(r: dict[str, Any]) -> str:
    lines = [
        "| jobs queued at once | plain moto: push / drain | local stack: push / drain |",
        "|---:|---:|---:|",
    ]
    for row in r["local_depth"]["rows"]:
        plain = row.get("plain_moto")
        moto = f"{plain['push_ms_per_job']:.1f} / {plain['drain_ms_per_job']:.1f} ms" if plain else "-"
        own = row["local_stack"]
        lines.append(f"| {row['depth']:,} | {moto} | {own['push_ms_per_job']:.2f} / {own['drain_ms_per_job']:.2f} ms |")
    return "\n".join(lines)


def large_payloads_table(r: dict[str, Any]) -> str:
    large = r["large_payloads"]
    lines = [
        "| params | kept | message | SQS | Lambda | S3 | total per million jobs | push CPU | run CPU |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, row in large["sizes"].items():
        for kept, figures in row.items():
            cost = figures["dollars_per_million_jobs"]
            lines.append(
                f"| {int(size) / 1e6:g} MB | {kept} | {figures['message_bytes']:,} B | ${cost['sqs']:.2f} |"
                f" ${cost['lambda']:.2f} | ${cost['s3']:.2f} | **${cost['total']:.2f}** |"
                f" {figures['push_cpu_us_per_job'] / 1000:.2f} ms | {figures['run_cpu_us_per_job'] / 1000:.2f} ms |"
            )
    lines += [
        "",
        f"Offloading costs less than inline from about **{large['break_even_kib']} KiB** of params"
        f" (measured {r['date']} by `make bench`).",
    ]
    return "\n".join(lines)


#: (file, region name) -> how the region is rendered.
REGIONS: dict[tuple[str, str], Callable[[dict[str, Any]], str]] = {
    ("README.md", "bench-time"): bench_time,
    ("README.md", "soak"): soak_sentence,
    ("README.md", "local-stack"): local_stack_table,
    ("docs/reliability.md", "soak"): soak_table,
    ("docs/benchmarks.md", "large-payloads"): large_payloads_table,
}


def _span(text: str, name: str) -> tuple[int, int]:
    start, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
    first = text.index(start) + len(start)
    return first, text.index(end, first)


def current(root: Path, results: dict[str, Any]) -> dict[tuple[str, str], tuple[str, str]]:
    """Per region: what its file holds, and what the results render."""
    found = {}
    for (path, name), render in REGIONS.items():
        text = (root / path).read_text()
        first, last = _span(text, name)
        shown = text[first:last]
        wanted = render(results)
        wanted = f"\n{wanted}\n" if shown.startswith("\n") else wanted
        found[(path, name)] = (shown, wanted)
    return found


def stale(root: Path, results: dict[str, Any]) -> list[str]:
    return [
        f"{path} figures:{name}" for (path, name), (shown, wanted) in current(root, results).items() if shown != wanted
    ]


def rewrite(root: Path, results: dict[str, Any]) -> None:
    for (path, name), (_, wanted) in current(root, results).items():
        file = root / path
        text = file.read_text()
        first, last = _span(text, name)
        file.write_text(text[:first] + wanted + text[last:])


if __name__ == "__main__":
    rewrite(ROOT, json.loads(LATEST.read_text()))
