"""``perfgate export``: thin command over ``perfgate.report.exports``."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from perfgate.cli.console import guarded, say
from perfgate.errors import UsageError


def export_command(
    documents: list[Path] = typer.Argument(
        ..., help="result documents (perfgate run --out) or verdicts (perfgate compare --json)"
    ),
    fmt: str = typer.Option(
        "csv",
        "--format",
        "-f",
        help="csv (runs or verdicts), bmf (Bencher Metric Format), github-action-benchmark "
        "(customSmallerIsBetter: step time, first step, memory) or "
        "github-action-benchmark-bigger (customBiggerIsBetter: throughput, TFLOP/s)",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="the file to write (atomically); standard output without it"
    ),
    openmetrics: bool = typer.Option(
        False,
        "--openmetrics",
        help="write the runs' Prometheus series as OpenMetrics text (with one verdict given, "
        "its states and change ratios too)",
    ),
    push: str | None = typer.Option(
        None,
        help="with --openmetrics: also push each run to this Prometheus Pushgateway "
        "(e.g. http://127.0.0.1:9091)",
    ),
) -> None:
    """Write runs or verdicts as CSV, Bencher Metric Format, github-action-benchmark JSON or
    OpenMetrics (and push them to a Pushgateway)."""
    from perfgate.files import write_text_atomic  # lazy: only to write the file

    if push is not None and not openmetrics:

        def refuse() -> None:
            raise UsageError("--push needs --openmetrics", "add --openmetrics")

        guarded(refuse)
    if openmetrics:
        from perfgate.monitoring.session import openmetrics_session  # lazy: prometheus-client

        outcome = guarded(lambda: openmetrics_session(documents, push))
        for grouping in outcome.pushed:
            say(f"pushed to {push}: " + ", ".join(f"{k}={v}" for k, v in grouping.items()))
        if out is None:
            if not push:
                sys.stdout.write(outcome.text)
            return
        guarded(lambda: write_text_atomic(out, outcome.text, option="--out"))
        say(f"exported OpenMetrics: {out}")
        return
    from perfgate.report.documents import read_runs_and_verdicts  # lazy: the document models
    from perfgate.report.exports import export_documents, parse_format  # lazy: as above

    export_format = guarded(lambda: parse_format(fmt))
    results, verdicts = guarded(lambda: read_runs_and_verdicts(documents))
    text = guarded(lambda: export_documents(results, verdicts, export_format))
    if out is None:
        sys.stdout.write(text)
        return
    guarded(lambda: write_text_atomic(out, text, option="--out"))
    kind = f"{len(results)} run(s)" if results else f"{len(verdicts)} verdict(s)"
    say(f"exported {kind} as {fmt}: {out}")
