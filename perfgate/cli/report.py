"""``perfgate report``: thin command over ``perfgate.report.html_report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from perfgate.cli.options import ConfigFile

DEFAULT_REPORT = Path("perfgate-report.html")


def report_command(
    results: list[Path] = typer.Argument(..., help="result documents (perfgate run --out)"),
    verdict: Path | None = typer.Option(None, help="a verdict document (perfgate compare --json)"),
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
    from perfgate.cli.console import guarded, say

    def action() -> tuple[Path, str]:
        from perfgate.config import load_config
        from perfgate.documents.verdict import VERDICT
        from perfgate.files import check_output_path
        from perfgate.report.documents import advice_beside
        from perfgate.report.html_report import stored_histories, write_report
        from perfgate.result import load_result
        from perfgate.run import utc_now

        check_output_path(out, "--out")  # before the reading and drawing, not after
        settings = load_config(config)
        heads = [load_result(path) for path in results]
        verdict_doc: dict[str, Any] | None = None
        if verdict is not None:
            verdict_doc = VERDICT.dump(VERDICT.load(verdict, "verdict file"))
        histories, note = (
            stored_histories(settings.database_url, settings.root, heads, branch, history_runs)
            if history
            else ({}, "History not drawn (--no-history).")
        )
        beside = [found for path in results if (found := advice_beside(path)) is not None]
        written = write_report(
            out,
            heads,
            verdict=verdict_doc,
            advice_paths=[*advice, *beside],
            histories=histories,
            history_note=note,
            generated_at=utc_now(),
            inputs=[str(p) for p in (*results, *([verdict] if verdict else []))],
        )
        return written, note

    written, note = guarded(action)
    if note:
        say(note)
    say(f"report: {written.resolve()}")
