"""`make bench`: every benchmark, results to benchmarks/results/, a table into the README.

    python benchmarks/run.py [--small] [--readme README.md]

The results carry a ``budgets`` list (:mod:`budgets`): each budget's figure, its
limit, and whether this run met it. The run exits with status 1 if any is
missed. ``--small`` runs each benchmark at a tiny size (the test suite's smoke
test), where the figures say nothing: budgets are listed but not enforced.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baseline
import bench_coldstart
import bench_fanout
import bench_flow_control
import bench_large_payloads
import bench_long_delay
import bench_push
import bench_round_trips
import bench_runner
import bench_runner_logged
import bench_side_by_side
import bench_verify
import budgets
import cost_model
import figures
import local_stack_depth
import soak
from _common import ROOT

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="tiny sizes: check that everything runs")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "latest.json")
    parser.add_argument("--readme", type=Path, default=None, help="update the table between the bench markers")
    parser.add_argument(
        "--docs", action="store_true", help="update the figures the README and docs quote (benchmarks/figures.py)"
    )
    args = parser.parse_args()
    began = time.perf_counter()
    logging.disable(logging.WARNING)
    results: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
    }
    results["push"] = bench_push.run(200 if args.small else 10_000, 100 if args.small else 2_000)
    results["runner"] = bench_runner.run(50 if args.small else 2_000)
    results["runner_logged"] = bench_runner_logged.run(100 if args.small else 2_000, 2 if args.small else 5)
    results["side_by_side"] = bench_side_by_side.run(
        1 if args.small else 5, 1 if args.small else 3, 20 if args.small else 100
    )
    results["round_trips"] = bench_round_trips.run(3 if args.small else 50)
    results["fanout"] = bench_fanout.run(500 if args.small else 10_000)
    results["coldstart"] = bench_coldstart.run(2 if args.small else 21)
    results["flow"] = bench_flow_control.run(200 if args.small else 1_000)
    results["long_delay"] = bench_long_delay.run(3600 if args.small else 86_400)
    results["cost"] = cost_model.run(
        results["runner"], results["round_trips"], results["coldstart"], results["side_by_side"]
    )
    results["large_payloads"] = bench_large_payloads.run(
        {10_000: 20, 100_000: 10, 1_000_000: 4, 5_000_000: 2} if args.small else None
    )
    results["verify"] = bench_verify.run()  # no smaller size: its chain takes 20 s whatever the stack
    if args.small:
        results["local_depth"] = local_stack_depth.run((250, 1_000), sample=200, plain_moto_depths=())
    else:
        results["local_depth"] = local_stack_depth.run()
    # the machine's own speed, just before the soak and just after it: the soak's yardstick
    messages = 200 if args.small else 5_000
    before = baseline.run(messages)
    logging.disable(logging.CRITICAL)  # a 5% fault rate logs a warning every few jobs
    soaked = soak.run(500 if args.small else 50_000, 0.05)
    logging.disable(logging.WARNING)
    after = baseline.run(messages)
    results["baseline"] = {
        "messages": messages,
        "before_ms_per_message": before["ms_per_message"],
        "after_ms_per_message": after["ms_per_message"],
        "ms_per_message": round((before["ms_per_message"] + after["ms_per_message"]) / 2, 4),
    }
    results["soak"] = soak_figures(soaked)
    results["budgets"] = budgets.evaluate(results)
    results["wall_s"] = round(time.perf_counter() - began, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    table = render(results)
    print(table)
    if args.readme:
        text = args.readme.read_text()
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        args.readme.write_text(f"{head}{START}\n{table}\n{END}{tail}")
    if args.docs:
        figures.rewrite(ROOT, results)
    failed = budgets.missed(results["budgets"], complete=not args.small)
    for entry in failed:
        figure = "not measured" if entry["value"] is None else f"{entry['value']:.4g} {entry['unit']}"
        print(f"budget missed: {entry['name']}: {figure} (limit {entry['limit']:g})")
    if not soaked.balanced:
        print("the soak did not balance: a job was lost or unexplained (python benchmarks/soak.py shows which)")
    if (failed and not args.small) or not soaked.balanced:
        sys.exit(1)


def soak_figures(soaked: soak.SoakResult) -> dict[str, Any]:
    """What latest.json keeps of the soak: what the README and docs/reliability.md quote."""
    kept = (
        "jobs",
        "fault_rate",
        "pushed",
        "succeeded",
        "duplicate",
        "superseded",
        "dead_lettered",
        "lost",
        "dead_letter_copies",
        "dead_letters_redriven",
        "dead_and_done",
        "queues_empty",
        "faults_injected",
    )
    return {
        **{name: getattr(soaked, name) for name in kept},
        "wall_s": round(soaked.seconds, 1),
        "balanced": soaked.balanced,
    }


def large_payloads_line(large: dict[str, Any]) -> str:
    mb, five = large["sizes"]["1000000"], large["sizes"]["5000000"]["offloaded"]
    inline, offloaded = (mb[kept]["dollars_per_million_jobs"]["total"] for kept in ("inline", "offloaded"))
    return (
        f"**Large params**, per million jobs: 1 MB of params inline ${inline:.2f},"
        f" offloaded to the payload bucket ${offloaded:.2f}; 5 MB (offloaded"
        f" only) ${five['dollars_per_million_jobs']['total']:.2f}. Push CPU per 5 MB job"
        f" {five['push_cpu_us_per_job'] / 1000:.1f} ms, the runner's {five['run_cpu_us_per_job'] / 1000:.1f} ms (fetch,"
        f" SHA-256, JSON). Offloading costs less only from about {large['break_even_kib']} KiB: docs/benchmarks.md."
    )


def render(r: dict[str, Any]) -> str:
    push = r["push"]["results"]
    lines = [
        f"Measured {r['date']} on {r['machine']} (2 cores), moto as the endpoint; `make bench` reproduces it "
        f"({r['wall_s']} s) and fails if a budget is missed. Raw figures: `benchmarks/results/latest.json`.",
        "",
        "**Budgets**:",
        "",
        "| budget | figure | limit | met |",
        "|---|---:|---:|:---:|",
    ]
    for b in r["budgets"]:
        figure = "not measured" if b["value"] is None else f"{b['value']:.3g} {b['unit']}"
        lines.append(f"| {b['name']} | {figure} | ≤ {b['limit']:g} | {'yes' if b['ok'] else '**no**'} |")
    trips = r["round_trips"]
    lines += [
        "",
        f"**Round trips per batch** ({trips['batches']} batches of {trips['batch']}, a modelled DynamoDB latency of "
        f"{trips['latency_ms']:g} ms per request): a batch's claims go out together and its settles overlap the "
        "next jobs, so a batch waits through the longest chain of requests, not their sum. The wall time includes "
        "moto's own processing, which handles one request at a time.",
        "",
        "| jobs | DynamoDB requests / batch | round trips / batch (median, worst) | wall / batch |",
        "|---|---:|---:|---:|",
    ]
    for name, f in trips["kinds"].items():
        lines.append(
            f"| {name} | {f['requests_per_batch']:g} | {f['round_trips_per_batch']:g}, "
            f"{f['max_round_trips_per_batch']:g} | {f['wall_ms_per_batch']:.0f} ms |"
        )
    lines += [
        "",
        f"**Push** ({r['push']['jobs']:,} jobs each; CPU with moto in its own process):",
        "",
        "| pusher | SQS requests / job | client CPU / job | wall / job (moto on loopback / in-process) |",
        "|---|---:|---:|---:|",
    ]
    for name, f in push.items():
        lines.append(
            f"| {name} | {f['sqs_requests_per_job']:.3g} | {f['client_cpu_us_per_job']:,.0f} µs | "
            f"{f['wall_us_per_job'] / 1000:,.2f} / {f['wall_us_per_job_in_process'] / 1000:,.2f} ms |"
        )
    lines += [
        "",
        f"**Runner overhead** (no-op job, {r['runner']['jobs']:,} each, batches of 10):",
        "",
        "| job | DynamoDB requests / job | runner CPU / job | budget |",
        "|---|---:|---:|---|",
    ]
    budgets = {
        "plain": "0",
        "remove_duplicates, runs": "≤ 2",
        "remove_duplicates, duplicate": "≤ 1",
        "leaf": "≤ 0.1",
        "cancellable, nothing cancelled": "≤ 0.1",
        "batch member, ends": "≤ 1.1 (≤ 2 items written)",
        "priority lane, runs": "0 (and 0 SQS requests; a push to a lane: 0.1)",
    }
    for name, f in r["runner"]["jobkit"].items():
        lines.append(
            f"| jobkit: {name} | {f['dynamodb_requests_per_job']:.3g} | {f['cpu_us_per_job']:,.0f} µs | "
            f"{budgets.get(name, '')} |"
        )
    for name, f in r["runner"]["powertools"].items():
        lines.append(
            f"| Powertools BatchProcessor + Idempotency: {name} | {f['dynamodb_requests_per_job']:.3g} | "
            f"{f['cpu_us_per_job']:,.0f} µs | |"
        )
    logged = r.get("runner_logged")
    if logged is not None:
        lines += [
            "",
            f"With the work a deployed runner does (its INFO line and EMF metrics, to a thrown-away stdout; "
            f"{logged['jobs']:,} plain jobs, {logged['rounds']} alternating rounds, each side in a fresh "
            f"interpreter built as a Lambda container builds it): jobkit {logged['jobkit_cpu_us_per_job']:,.0f} µs "
            f"a job, a Powertools BatchProcessor with one Logger line and one metric per record "
            f"{logged['powertools_cpu_us_per_job']:,.0f} µs: {logged['ratio']:.2f}x (paired).",
        ]
        if "validating_powertools_cpu_us_per_job" in logged:
            lines[-1] += (
                f" The same BatchProcessor checking each body as jobkit does (a pydantic model, as Powertools' parser"
                f" utility checks one): {logged['validating_powertools_cpu_us_per_job']:,.0f} µs, and jobkit"
                f" {logged['ratio_vs_validating']:.2f}x of it."
            )
    side = r.get("side_by_side")
    if side is not None:
        lines += [
            "",
            f"**Jobs side by side** (a batch of {side['batch']} jobs that each wait {side['wait_ms']} ms on the "
            f"network, {side['batches']} batches a side, built as Lambda builds the container; billed: each "
            "invocation rounded up to the millisecond):",
            "",
            "| runner | ms / batch | jobs / s / container | billed Lambda ms / million jobs |",
            "|---|---:|---:|---:|",
        ]
        for name, f in side["results"].items():
            lines.append(
                f"| {name} | {f['batch_ms']:,.0f} | {f['jobs_per_s_per_container']:,.1f} | "
                f"{f['billed_ms_per_million_jobs']:,.0f} |"
            )
    flow = r["flow"]
    lines += [
        "",
        f"**Flow control** (per job pushed, {flow['jobs']:,} jobs a case, batches of 10; SQS sends are the "
        "runner's own: delay hops and held jobs; the event source mapping's receives and deletes are not counted):",
        "",
        "| case | DynamoDB requests / job | SQS sends / job | ran / debounced | held (times) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, f in flow["cases"].items():
        lines.append(
            f"| {name} | {f['dynamodb_requests_per_job']:.3g} | {f['sqs_sends_per_job']:.3g} | "
            f"{f['ran']:,} / {f['debounced']:,} | {f['held']:,} |"
        )
    fan = r["fanout"]
    cold = r["coldstart"]
    depth = r["local_depth"]
    rows = ", ".join(
        f"{row['depth']:,} queued: push {row['local_stack']['push_ms_per_job']:.2f}, "
        f"drain {row['local_stack']['drain_ms_per_job']:.2f}"
        for row in depth["rows"]
    )
    lines += [
        "",
        f"**Fan-out**: a root with {fan['leaves']:,} leaves on {fan['containers']} containers cost "
        f"{fan['dynamodb_requests']} DynamoDB requests ({fan['dynamodb_requests_per_leaf']:.4f} per leaf). "
        f"After a newer root was recorded half-way, {fan['old_leaves_run_after_newer_root']:,} old leaves still ran "
        f"(the last {fan['last_old_leaf_ran_s_after_newer_root']} s after it, within the 15 s root cache window) and "
        f"{fan['old_leaves_superseded']:,} were superseded.",
        "",
        f"**Long delay**: a job delayed {r['long_delay']['delay_s'] / 3600:g} h reached its release in "
        f"{r['long_delay']['hops']} hops: {r['long_delay']['invocations']} invocations, "
        f"{r['long_delay']['sqs_requests']} SQS requests ({r['long_delay']['sqs_sends']} sends), "
        f"{r['long_delay']['dynamodb_requests']} DynamoDB requests, and ran "
        f"{r['long_delay']['ran_late_s']} s after its release (docs/benchmarks.md compares a schedule per job).",
        "",
        large_payloads_line(r["large_payloads"]),
        "",
        f"**`jobkit verify`** on the example stack ({r['verify']['queues']} queues, deployed from its template): "
        f"{r['verify']['seconds']} s, exit status {r['verify']['exit_status']}. Per queue, verify itself made "
        + ", ".join(f"{n:g} {s.rstrip('.')}" for s, n in r["verify"]["verify_requests_per_queue"].items())
        + " requests; the runners made "
        + ", ".join(f"{n:g} {s.rstrip('.')}" for s, n in r["verify"]["runner_requests_per_queue"].items())
        + f" requests in {r['verify']['invocations_per_queue']:g} invocations (the chain's 20 hops are most of them).",
        "",
        f"**Cold start** (medians of {cold['repeats']} fresh interpreters each; ratios paired): importing the "
        f"handler {cold['handler_import_ms']:.0f} ms; import plus the first invocation's build (Powertools logger, "
        f"metrics, the runner) {cold['handler_import_and_build_ms']:.0f} ms: "
        f"{cold['import_and_build_vs_powertools']:.2f}x a Powertools BatchProcessor + Idempotency handler "
        f"({cold['powertools_ms']:.0f} ms) and {cold['import_and_build_ratio']:.2f}x `import boto3` + one client "
        f"({cold['baseline_ms']:.0f} ms). The build makes no client: SQS's comes with the first job that fails, is "
        "re-enqueued or pushes, and DynamoDB's with the first that uses the jobs table. A container whose jobs use "
        f"the table, with its DynamoDB client made, starts in {cold['handler_with_table_client_ms']:.0f} ms "
        f"({cold['with_table_client_vs_powertools']:.2f}x the Powertools handler, which makes that client at import). "
        f"As Lambda runs it, from a read-only layer: {cold['read_only_no_bytecode_ms']:.0f} ms without bytecode "
        f"(every layer before this one), {cold['read_only_shipped_bytecode_ms']:.0f} ms with the bytecode `sam build` "
        f"now ships ({cold['shipped_bytecode_vs_none']:.2f}x, paired); the Powertools handler as `sam build` ships it "
        f"(read-only, no bytecode survives SAM's packaging) {cold['powertools_read_only_ms']:.0f} ms: "
        f"{cold['as_lambda_runs_it_vs_powertools']:.2f}x, and {cold['as_lambda_runs_it_vs_baseline']:.2f}x "
        "`import boto3` + one client (the runtime's, with its bytecode).",
        "",
        f"**The local stack at depth** (ms per job, {depth['sample']:,} jobs pushed onto and drained from a queue "
        f"that holds the depth): {rows}. **Soak**: {r['soak']['jobs']:,} jobs with 5% of AWS calls failing, "
        f"{r['soak']['wall_s']} s, {'every job accounted for' if r['soak']['balanced'] else '**not balanced**'}.",
        "",
        f"**Cost per million jobs** ({r['cost']['prices']['as_of']}; 256 MB arm64, full batches of "
        f"{r['cost']['assumptions']['payload_bytes']}-byte bodies (SQS bills each 64 KB chunk of a request as one), "
        f"{r['cost']['assumptions']['log_bytes_per_job']} bytes of INFO logs and EMF per job and Lambda's "
        f"{r['cost']['assumptions']['platform_log_bytes_per_invocation']} a batch, at the first tier of Lambda's log "
        f"prices; a cold start in {r['cost']['assumptions']['cold_start_share']:.0%} of invocations, its "
        f"{r['cost']['assumptions']['init_ms']:.0f} ms INIT billed since August 2025):",
        "",
        "| job | SQS | Lambda | DynamoDB | logs | total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, c in r["cost"]["dollars_per_million_jobs"].items():
        lambda_cost = c["lambda_requests"] + c["lambda_compute"]
        lines.append(
            f"| {name} | ${c['sqs']:.2f} | ${lambda_cost:.2f} | ${c['dynamodb']:.2f} | ${c['logs']:.2f} | "
            f"${c['total']:.2f} |"
        )
    idle = r["cost"]["idle_queue"]
    lines += [
        "",
        f"An idle queue, or an idle priority lane (its own event source mapping), costs about "
        f"${idle['dollars_per_month']:.2f} a month in the mapping's long polls ({idle['pollers']} pollers x a 20 s "
        f"poll = {idle['receive_requests_per_month']:,.0f} requests). CloudWatch bills each metric name x JobType as "
        "a custom metric ($0.30 a month; 14 per type, and 1 per priority lane of the type's queue).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
