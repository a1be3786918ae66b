"""``perfgate baseline refresh / show / export``: thin commands over ``perfgate.baseline``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, guarded, say
from perfgate.cli.options import ConfigFile
from perfgate.report.terminal import PlainTable

baseline_app = typer.Typer(
    no_args_is_help=True, help="Baselines: refresh from history, show, export snapshots."
)


@baseline_app.command("refresh")
def refresh(
    branch: str = typer.Option(..., help="branch whose history sets the baselines, e.g. main"),
    window: int = typer.Option(10, help="at most this many runs per baseline"),
    min_segment: int = typer.Option(5, help="fewest runs on each side of a change point"),
    min_runs: int = typer.Option(3, help="fewest runs a baseline is built from"),
    json_out: Path | None = typer.Option(
        None, "--json", help="write the refresh document here (bisect-steps reads it)"
    ),
    config: ConfigFile = None,
) -> None:
    """Detect change points in the branch's history and move baselines after confirmed steps."""
    from perfgate.baseline.session import refresh_session  # lazy: the database stack

    report = guarded(
        lambda: refresh_session(
            config,
            branch,
            window=window,
            min_segment=min_segment,
            min_runs=min_runs,
            json_out=json_out,
        )
    )
    table = PlainTable(title=f"baseline refresh · {branch}", title_justify="left")
    for header in ("workload", "suite", "key", "runs", "change points", "action", "why"):
        table.add_column(header)
    for outcome in report.keys:
        steps = ", ".join(f"@{c.index} {c.relative_change:+.1%}" for c in outcome.change_points)
        table.add_row(
            outcome.workload,
            outcome.suite or "—",
            outcome.key[:12],
            str(outcome.runs_in_history),
            steps or "—",
            outcome.action,
            outcome.reason,
        )
    console.print(table)
    if json_out is not None:
        say(f"refresh: {json_out}")


@baseline_app.command("show")
def show(
    branch: str | None = typer.Option(None, help="only this branch"),
    all_: bool = typer.Option(False, "--all", help="include retired baselines"),
    config: ConfigFile = None,
) -> None:
    """The baselines in the database, with how and why each was set."""
    from perfgate.baseline.session import stored_baselines  # lazy: the database stack
    from perfgate.report.formatting import format_seconds  # lazy: the report's renderers

    rows = guarded(lambda: stored_baselines(config, branch, include_retired=all_))
    table = PlainTable(title="baselines", title_justify="left")
    for header in (
        "workload",
        "suite",
        "branch",
        "key",
        "status",
        "step (median)",
        "runs",
        "created",
        "why",
    ):
        table.add_column(header)
    for row in rows:
        step = row.metrics.get("step_time_s", {})
        table.add_row(
            row.workload,
            row.suite or "—",
            row.branch,
            row.key[:12],
            row.status,
            format_seconds(step["median"]) if step else "—",
            f"{step.get('runs', 0)} ({row.method.get('outliers_dropped', 0)} dropped)",
            row.created_at,
            row.reason,
        )
    console.print(table)


@baseline_app.command("export")
def export(
    branch: str = typer.Option("main", help="branch whose live baselines are exported"),
    out_dir: Path = typer.Option(Path("baselines"), help="snapshot folder"),
    allow_empty: bool = typer.Option(
        False, help="exit 0 when the branch has no live baseline yet (the first nights)"
    ),
    config: ConfigFile = None,
) -> None:
    """Write baselines/<suite>/<workload>@<preset>-<key prefix>.json for every live baseline
    of the branch (exit 3 when there is none, unless --allow-empty)."""
    from perfgate.baseline.session import export_session  # lazy: the database stack

    written, removed = guarded(
        lambda: export_session(config, branch, out_dir, allow_empty=allow_empty)
    )
    if not written and not removed:
        say(f"no live baseline on branch {branch} yet: nothing exported")
    for path in written:
        say(f"wrote {path}")
    for path in removed:
        say(f"removed {path} (no live baseline)")
