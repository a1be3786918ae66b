"""A bisection as GitHub markdown: the section a PR comment, a job summary or an issue shows.

``perfgate bisect --markdown`` writes one (to post where the regression is discussed); the
nightly job's summary and its opt-in issue hold one per slowdown its refresh found
(:func:`nightly_markdown`). Commit subjects are text someone else wrote: they are escaped
like every untrusted string of the PR comment.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfgate.documents.bisect import BisectProbe, BisectReport, ExplainedStep
from perfgate.report.bisect_text import SHORT, probe_effect
from perfgate.report.compare_markdown import escape_cell, escape_text
from perfgate.report.formatting import format_seconds, mover_cells, work_change_parts

NIGHTLY_TITLE = "perfgate nightly: training got slower on"
"""The start of the nightly summary's heading (and of the issue the nightly keeps open)."""


def bisect_markdown(report: BisectReport, *, heading: str = "###") -> str:
    """The bisection: conclusion, the culprit's effect, the work it changed, what moved, then
    every probe folded away."""
    lines = [
        f"{heading} perfgate bisect `{report.good[:SHORT]}..{report.bad[:SHORT]}` · "
        f"{len(report.commits) - 1} commits · {_conclusion(report)}",
        "",
    ]
    if report.conclusion == "found" and report.first_bad is not None:
        subject = f" {escape_text(report.culprit_subject)}" if report.culprit_subject else ""
        lines.extend([f"**Culprit: `{report.first_bad[:SHORT]}`**{subject}", ""])
        if report.effect is not None:
            lines.extend([f"Against its parent: {escape_text(probe_effect(report.effect))}", ""])
        lines.extend(_work_table(report))
        lines.extend(_moved_table(report))
    elif report.conclusion == "narrowed" and report.first_bad and report.last_good:
        lines.append(
            f"The change is after `{report.last_good[:SHORT]}`, at or before "
            f"`{report.first_bad[:SHORT]}`."
        )
        lines.append("")
    lines.extend(f"> {escape_text(note)}" for note in report.notes)
    if report.notes:
        lines.append("")
    lines.extend(_probes(report.probes, report.rounds))
    return "\n".join(lines).rstrip() + "\n"


def nightly_markdown(branch: str, explained: Sequence[ExplainedStep]) -> str:
    """The nightly summary of the slowdowns a refresh found: each step with its range and
    what its bisection concluded (or why it was not searched)."""
    if not explained:
        return f"## perfgate nightly · {branch}\n\nNo new slowdown in the stored history.\n"
    lines = [f"## {NIGHTLY_TITLE} {branch}", ""]
    for entry in explained:
        step = entry.step
        suite = f" ({escape_text(entry.suite)})" if entry.suite else ""
        lines.append(
            f"**{escape_text(entry.workload)}**{suite}: step time "
            f"{format_seconds(step.median_before)} → {format_seconds(step.median_after)} "
            f"({step.relative_change:+.1%}) between runs of "
            f"`{(step.commit_before or '?')[:SHORT]}` and `{(step.commit_after or '?')[:SHORT]}`"
        )
        lines.append("")
        if entry.bisect is not None:
            lines.append(bisect_markdown(entry.bisect, heading="####"))
        else:
            lines.append(f"> {escape_text(entry.skipped or 'not searched')}")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _conclusion(report: BisectReport) -> str:
    return {
        "found": "culprit found",
        "narrowed": "narrowed, not decided",
        "no_regression": "no regression in the range",
    }[report.conclusion]


def _work_table(report: BisectReport) -> list[str]:
    if not report.work_changes:
        return []
    rows = ["Work per step (exact counts):", "", "| counter | before | after | change |"]
    rows.append("|---|---:|---:|---|")
    for change in report.work_changes:
        cells = work_change_parts(change.counter, change.base, change.head)
        rows.append("| " + " | ".join(escape_cell(cell) for cell in cells) + " |")
    return [*rows, ""]


def _moved_table(report: BisectReport) -> list[str]:
    if report.attribution is None or not report.attribution.movers:
        return []
    rows = ["What moved (profiled, per step):", "", "| op or kernel | time | calls |"]
    rows.append("|---|---|---|")
    for mover in report.attribution.movers:
        rows.append("| " + " | ".join(escape_cell(cell) for cell in mover_cells(mover)) + " |")
    return [*rows, ""]


def _probes(probes: Sequence[BisectProbe], rounds: int) -> list[str]:
    seconds = sum(p.seconds for p in probes)
    lines = [
        f"<details><summary>{len(probes)} probes, {rounds} A/B rounds, {seconds:.0f} s</summary>",
        "",
        "| base | head | state | effect |",
        "|---|---|---|---|",
    ]
    lines.extend(
        f"| `{p.base[:SHORT]}` | `{p.head[:SHORT]}` | {p.state} | {escape_cell(probe_effect(p))} |"
        for p in probes
    )
    return [*lines, "", "</details>"]
