"""``jobkit schedules``: each declared schedule, and when it fires next."""

from __future__ import annotations

from typing import Any

import click

from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output
from jobkit.ops.config import CliConfig


@click.command(cls=OpsCommand)
@click.option("--count", default=3, show_default=True, type=click.IntRange(1, 100), help="Firings per schedule.")
@ops_command
def schedules(config: CliConfig, output: Output, count: int) -> None:
    """Each schedule of the declaration ([schedules.NAME] in jobs.toml): its job
    type, expression and time zone, and its next firings, in its time zone and
    in UTC. Rate schedules count from now (on AWS, from when they were created)."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from rich.table import Table
    from rich.text import Text

    from jobkit.core.cron import CronNotSupported, iso_utc, next_firing

    now = config.clock.now()
    rows: list[dict[str, Any]] = []
    for name, schedule in sorted(config.declaration.schedules.items()):
        firings: list[float] = []
        note = None
        try:
            at: float | None = now
            while len(firings) < count and at is not None:
                at = next_firing(schedule.cron, schedule.rate, schedule.timezone, at, now)
                if at is not None:
                    firings.append(at)
        except CronNotSupported as exc:
            note = str(exc)
        zone = ZoneInfo(schedule.timezone)
        rows.append(
            {
                "schedule": name,
                "type": schedule.type,
                "domain": schedule.domain,
                "expression": schedule.expression,
                "timezone": schedule.timezone,
                "flexible_window_min": schedule.flexible_window_min,
                "next": [
                    {"utc": iso_utc(f), "local": datetime.fromtimestamp(f, zone).isoformat(timespec="minutes")}
                    for f in firings
                ],
                "note": note,
            }
        )

    def view() -> Table:
        table = Table(title="schedules")
        for column in ("schedule", "type", "expression", "time zone", "next (local)", "next (UTC)"):
            table.add_column(column, no_wrap=True)
        for row in rows:
            local = row["note"] or "\n".join(f["local"].replace("T", " ") for f in row["next"])
            utc = "\n".join(f["utc"].replace("T", " ").replace(":00Z", "Z") for f in row["next"])
            table.add_row(row["schedule"], row["type"], row["expression"], row["timezone"], local, utc)
        return table

    if not rows:
        # as text, not markup: rich would take [schedules.NAME] for a style and drop it
        output.show({"schedules": []}, lambda: Text("no schedules declared ([schedules.NAME] in jobs.toml)"))
        return
    output.show({"schedules": rows}, view)
