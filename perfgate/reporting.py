"""``perfgate report`` as a library call: read the documents, the stored history and the advice
beside each result, diagnose each workload, and write the self-contained HTML report.

A session beside ``perfgate.report`` rather than inside it: the report renders what it is
given and never queries a database or runs the classifier; this module gathers those inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.config import load_config
from perfgate.diagnose.session import diagnose_runs
from perfgate.documents.bisect import BISECT
from perfgate.documents.history import DEFAULT_HISTORY_RUNS, WorkloadHistory
from perfgate.documents.result import load_result
from perfgate.documents.verdict import VERDICT
from perfgate.files import check_output_path
from perfgate.report.documents import advice_beside, read_advice
from perfgate.report.html_report import write_report
from perfgate.run import utc_now


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
    bisect: Path | None = None
    """A bisect document (``perfgate bisect --json``, or a night's ``bisect-steps``)."""


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
    verdict = VERDICT.load(request.verdict, "verdict file") if request.verdict else None
    bisect = BISECT.load(request.bisect, "bisect file") if request.bisect else None
    histories: dict[str, WorkloadHistory] = {}
    note = "History not drawn (--no-history)."
    if request.history:
        from perfgate.store.report_history import stored_histories  # lazy: the database stack

        url, root = settings.database_url, settings.root
        histories, note = stored_histories(url, root, heads, request.branch, request.history_runs)
    beside = [found for path in request.results if (found := advice_beside(path)) is not None]
    advice_paths = [*request.advice, *beside]
    advised = read_advice(advice_paths)
    verdicts = [p for p in (request.verdict, request.bisect) if p is not None]
    written = write_report(
        out,
        heads,
        verdict=verdict,
        advice=advised,
        diagnoses=diagnose_runs(heads, advised),
        histories=histories,
        history_note=note,
        generated_at=utc_now(),
        inputs=[str(p) for p in (*request.results, *verdicts, *advice_paths)],
        bisect=bisect,
    )
    return ReportOutcome(path=written, note=note)
