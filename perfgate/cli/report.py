"""``perfgate report``: thin command over ``perfgate.reporting``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import guarded, say
from perfgate.cli.options import ConfigFile

DEFAULT_REPORT = Path("perfgate-report.html")


def report_command(
    results: list[Path] = typer.Argument(..., help="result documents (perfgate run --out)"),
    verdict: Path | None = typer.Option(None, help="a verdict document (perfgate compare --json)"),
    bisect: Path | None = typer.Option(
        None, help="a bisect document (perfgate bisect --json): which commit made it slower"
    ),
    advice: list[Path] = typer.Option(
        [], help="advice documents (perfgate advise --json); <result>.advice.json is found alone"
    ),
    history: bool = typer.Option(True, help="draw the stored history when the database exists"),
    history_runs: int = typer.Option(100, min=1, max=100_000, help="runs of history per workload"),
    branch: str | None = typer.Option(None, help="history branch (default: the run's branch)"),
    out: Path = typer.Option(DEFAULT_REPORT, "--out", "-o", help="the HTML file to write"),
    config: ConfigFile = None,
) -> None:
    """Write the self-contained HTML report of results, a verdict, advice and history."""
    from perfgate.reporting import (  # lazy: the HTML stack (jinja, charts), to report
        ReportRequest,
        report_session,
    )

    request = ReportRequest(
        results=results,
        verdict=verdict,
        bisect=bisect,
        advice=advice,
        history=history,
        history_runs=history_runs,
        branch=branch,
        out=out,
        config=config,
    )
    outcome = guarded(lambda: report_session(request))
    if outcome.note:
        say(outcome.note)
    say(f"report: {outcome.path.resolve()}")
