"""``perfgate baseline refresh / show / export``: thin commands over ``perfgate.baseline``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from perfgate.cli.options import ConfigFile
from perfgate.config import Config, load_config
from perfgate.report.terminal import PlainTable

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

baseline_app = typer.Typer(
    no_args_is_help=True, help="Baselines: refresh from history, show, export snapshots."
)


def _engine(config: Config) -> Engine:
    from perfgate.store.engine import make_engine

    return make_engine(config.database_url, config.root)


@baseline_app.command("refresh")
def refresh(
    branch: str = typer.Option(..., help="branch whose history sets the baselines, e.g. main"),
    window: int = typer.Option(10, help="at most this many runs per baseline"),
    min_segment: int = typer.Option(5, help="fewest runs on each side of a change point"),
    min_runs: int = typer.Option(3, help="fewest runs a baseline is built from"),
    config: ConfigFile = None,
) -> None:
    """Detect change points in the branch's history and move baselines after confirmed steps."""
    from perfgate.baseline.refresh import RefreshPolicy, refresh_baselines
    from perfgate.cli.console import console, guarded
    from perfgate.errors import UsageError

    def action() -> Table:
        if window < 1 or min_runs < 1 or min_runs > window:
            raise UsageError(
                f"--window {window} / --min-runs {min_runs} are inconsistent",
                "use 1 <= --min-runs <= --window",
            )
        settings = load_config(config)
        policy = RefreshPolicy(window=window, min_segment=min_segment, min_runs=min_runs)
        outcomes = refresh_baselines(_engine(settings), branch, policy)
        table = PlainTable(title=f"baseline refresh · {branch}", title_justify="left")
        for header in ("workload", "suite", "key", "runs", "change points", "action", "why"):
            table.add_column(header)
        for outcome in outcomes:
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
        return table

    console.print(guarded(action))


@baseline_app.command("show")
def show(
    branch: str | None = typer.Option(None, help="only this branch"),
    all_: bool = typer.Option(False, "--all", help="include retired baselines"),
    config: ConfigFile = None,
) -> None:
    """The baselines in the database, with how and why each was set."""
    from sqlmodel import Session

    from perfgate.cli.console import console, guarded
    from perfgate.report.run_summary import format_seconds
    from perfgate.store.history import list_baselines

    def action() -> Table:
        settings = load_config(config)
        with Session(_engine(settings)) as session:
            rows = list_baselines(session, branch=branch, include_retired=all_)
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
        return table

    console.print(guarded(action))


@baseline_app.command("export")
def export(
    branch: str = typer.Option("main", help="branch whose live baselines are exported"),
    out_dir: Path = typer.Option(Path("baselines"), help="snapshot folder"),
    allow_empty: bool = typer.Option(
        False, help="exit 0 when the branch has no live baseline yet (the first nights)"
    ),
    config: ConfigFile = None,
) -> None:
    """Write baselines/<suite>/<key>.json for every live baseline of the branch (exit 3 when
    there is none, unless --allow-empty)."""
    from perfgate.baseline.export import export_baselines
    from perfgate.cli.console import guarded, say

    def action() -> tuple[list[Path], list[Path]]:
        from perfgate.errors import UsageError

        settings = load_config(config)
        target = out_dir if out_dir.is_absolute() else settings.root / out_dir
        if target.exists() and not target.is_dir():
            raise UsageError(f"--out-dir {target} is not a folder", "give a folder path")
        return export_baselines(_engine(settings), branch, target, allow_empty=allow_empty)

    written, removed = guarded(action)
    if not written and not removed:
        say(f"no live baseline on branch {branch} yet: nothing exported")
    for path in written:
        say(f"wrote {path}")
    for path in removed:
        say(f"removed {path} (no live baseline)")
