"""``perfgate report`` as a library call: read the documents, the stored history and the advice
beside each result, and write the self-contained HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.config import load_config
from perfgate.documents.verdict import VERDICT
from perfgate.files import check_output_path
from perfgate.report.documents import advice_beside
from perfgate.report.html_report import stored_histories, write_report
from perfgate.result import load_result
from perfgate.run import utc_now

DEFAULT_HISTORY_RUNS = 100


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    """What the report shows and where it goes."""

    results: Sequence[Path]
    """Result documents (``perfgate run --out``); the advice beside each is found alone."""
    out: Path
    """The HTML file to write."""
    verdict: Path | None = None
    """A verdict document (``perfgate compare --json``)."""
    advice: Sequence[Path] = ()
    """Advice documents (``perfgate advise --json``)."""
    history: bool = True
    """Draw the stored history when the database exists."""
    history_runs: int = DEFAULT_HISTORY_RUNS
    branch: str | None = None
    """The history's branch; None: the run's."""
    config: Path | None = None
    """The configuration file; None: the nearest perfgate.toml or pyproject.toml upwards."""


@dataclass(frozen=True, kw_only=True)
class ReportOutcome:
    """The report written, and what the history note says (why it is missing, if it is)."""

    path: Path
    note: str


def report_session(request: ReportRequest) -> ReportOutcome:
    """Write the report; an unwritable ``out`` fails before the reading and drawing."""
    out = request.out
    check_output_path(out, "--out")  # before the reading and drawing, not after
    settings = load_config(request.config)
    heads = [load_result(path) for path in request.results]
    verdict_doc: dict[str, Any] | None = None
    if request.verdict is not None:
        verdict_doc = VERDICT.dump(VERDICT.load(request.verdict, "verdict file"))
    histories, note = (
        stored_histories(
            settings.database_url, settings.root, heads, request.branch, request.history_runs
        )
        if request.history
        else ({}, "History not drawn (--no-history).")
    )
    beside = [found for path in request.results if (found := advice_beside(path)) is not None]
    verdicts = [request.verdict] if request.verdict else []
    written = write_report(
        out,
        heads,
        verdict=verdict_doc,
        advice_paths=[*request.advice, *beside],
        histories=histories,
        history_note=note,
        generated_at=utc_now(),
        inputs=[str(p) for p in (*request.results, *verdicts)],
    )
    return ReportOutcome(path=written, note=note)
