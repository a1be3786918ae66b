"""What a verdict leaves behind: the verdict document, the PR-comment markdown, the job summary,
the HTML report; and the comment that stands in for a verdict when nothing could be judged.

Every file is written atomically (a reader never sees half a verdict), and the comment is
rendered from the verdict object, never copied from a file someone else wrote.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from perfgate.diagnose.session import diagnose_runs
from perfgate.documents.advice import ADVICE, AdviceReport
from perfgate.documents.result import RunResult
from perfgate.documents.verdict import CompareVerdict, InconclusivePolicy, verdict_document
from perfgate.errors import PerfgateError
from perfgate.files import write_json_atomic
from perfgate.report.compare_markdown import (
    AdviceLine,
    append_step_summary,
    error_markdown,
    top_advice,
    verdict_markdown,
    write_markdown,
)
from perfgate.report.html_report import write_report
from perfgate.run import utc_now


def write_outputs(
    verdict: CompareVerdict,
    policy: InconclusivePolicy,
    json_out: Path | None,
    markdown_out: Path | None,
    advice: list[AdviceLine],
    report_link: str | None,
) -> list[str]:
    """The verdict document, the markdown file, and the GitHub job summary when set; one
    line per thing written, for the command to print."""
    written = []
    if json_out is not None:
        write_json_atomic(json_out, verdict_document(verdict, policy))
        written.append(f"verdict: {json_out}")
    text = verdict_markdown(
        verdict, inconclusive_policy=policy, advice=advice, report_link=report_link
    )
    if markdown_out is not None:
        write_markdown(markdown_out, text)
        written.append(f"markdown: {markdown_out}")
    summary = append_step_summary(text)
    if summary is not None:
        written.append(f"job summary: appended to {summary}")
    return written


def write_error_comment(error: PerfgateError, markdown_out: Path | None) -> None:
    """When nothing could be judged, the comment and job summary say so (an error is never
    left looking like the last run's verdict, nor like a regression)."""
    text = error_markdown(error)
    if markdown_out is not None:
        write_markdown(markdown_out, text)
    append_step_summary(text)


def read_advice(path: Path | None) -> AdviceReport | None:
    """The ``--advice`` document (``perfgate advise --json``), None without one; a bad file is
    a usage error naming it."""
    return ADVICE.load(path, "--advice file") if path is not None else None


def advice_lines(advice: AdviceReport | None) -> list[AdviceLine]:
    """The top advice the comment and job summary show (none without advice)."""
    return top_advice(advice) if advice is not None else []


def write_html(
    out: Path,
    verdict: CompareVerdict,
    policy: InconclusivePolicy,
    head: RunResult,
    advice: AdviceReport | None,
    branch: str,
    database: tuple[str, Path],
    advice_path: Path | None = None,
) -> str:
    """The HTML report of this comparison, with the baseline branch's stored history from
    ``database`` (URL and the root relative SQLite paths start from); ``advice_path``: where
    ``advice`` was read from or written to, listed among the report's inputs."""
    from perfgate.store.report_history import stored_histories  # lazy: the database stack

    histories, note = stored_histories(database[0], database[1], [head], branch, 100)
    write_report(
        out,
        [head],
        verdict=replace(verdict, inconclusive_policy=policy),
        advice=advice,
        diagnoses=diagnose_runs([head], advice),
        histories=histories,
        history_note=note,
        generated_at=utc_now(),
        inputs=[f"run {head.run_id}", *([str(advice_path)] if advice_path is not None else [])],
    )
    return f"report: {out.resolve()}"


def local_link(html: Path | None) -> str | None:
    """The pointer a comment shows when the report is a file (a CI artifact), not a URL."""
    return f"{html.name} (job artifact)" if html is not None else None
