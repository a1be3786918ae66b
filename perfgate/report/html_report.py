"""The self-contained HTML report: build the page from documents, render it, write it.

``perfgate report`` and ``perfgate compare --html`` both end here. The page is one file with its
styles and charts inline and a Content-Security-Policy that forbids scripts and fetches, so it
opens from a CI artifact on an air-gapped laptop, and a hostile string could not run even if
escaping ever failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from perfgate.documents.advice import AdviceReport
from perfgate.documents.bisect import BisectReport
from perfgate.documents.diagnosis import Diagnosis
from perfgate.documents.history import WorkloadHistory
from perfgate.documents.result import RunResult
from perfgate.documents.verdict import CompareVerdict
from perfgate.files import write_text_atomic
from perfgate.report.page import Page, build_page
from perfgate.report.templating import environment

REPORT_TEMPLATE = "report.html.j2"


def render_html(page: Page, workers: int | None = None) -> str:
    """The page as HTML (autoescaped: only the charts and highlighted snippets are markup), its
    charts drawn by ``workers`` processes (default: one per available core)."""
    html = environment(html=True).get_template(REPORT_TEMPLATE).render(page=page)
    return page.charts.fill(html, workers)


def write_report(
    out: Path,
    heads: Sequence[RunResult],
    *,
    verdict: CompareVerdict | None,
    advice: AdviceReport | None,
    diagnoses: Mapping[str, Diagnosis],
    histories: Mapping[str, WorkloadHistory],
    history_note: str,
    generated_at: str,
    inputs: Sequence[str],
    bisect: BisectReport | None = None,
) -> Path:
    """Build and render the page, and write it atomically to ``out``. ``diagnoses``: what
    bounds each workload, by name (``perfgate.diagnose.session.diagnose_runs``); ``inputs``:
    the documents it was made from, as the page lists them."""
    page = build_page(
        list(heads),
        verdict=verdict,
        advice=advice,
        diagnoses=diagnoses,
        histories=histories,
        history_note=history_note,
        generated_at=generated_at,
        inputs=inputs,
        bisect=bisect,
    )
    write_text_atomic(out, render_html(page), option="--out")
    return out
