"""A bisection for the terminal and the CI log: the conclusion first, then every probe.

Plain lines, one fact each, so nothing is cut at 80 columns and a log reader sees the culprit
on the second line.
"""

from __future__ import annotations

from perfgate.documents.bisect import BisectProbe, BisectReport
from perfgate.report.formatting import change_with_interval, mover_cells, work_change_text

SHORT = 12
"""Characters of a commit id shown."""


def bisect_lines(report: BisectReport) -> list[str]:
    """The report as lines: the conclusion, the culprit's effect and work, then the probes."""
    lines = [
        f"perfgate bisect {report.good[:SHORT]}..{report.bad[:SHORT]} "
        f"({len(report.commits) - 1} commits) · {report.conclusion.replace('_', ' ')}"
    ]
    if report.conclusion == "found" and report.first_bad is not None:
        subject = f" {report.culprit_subject}" if report.culprit_subject else ""
        lines.append(f"culprit: {report.first_bad[:SHORT]}{subject}")
        if report.effect is not None:
            lines.append(f"  against its parent: {probe_effect(report.effect)}")
        lines.extend(
            f"  work per step: {work_change_text(c.counter, c.base, c.head)}"
            for c in report.work_changes
        )
        if report.attribution is not None:
            lines.extend(
                f"  moved: {', '.join(mover_cells(mover))}" for mover in report.attribution.movers
            )
    elif report.conclusion == "narrowed" and report.first_bad and report.last_good:
        lines.append(
            f"the change is after {report.last_good[:SHORT]}, at or before "
            f"{report.first_bad[:SHORT]}"
        )
    lines.extend(f"note: {note}" for note in report.notes)
    seconds = sum(p.seconds for p in report.probes)
    lines.append(f"probes: {len(report.probes)}, {report.rounds} A/B rounds, {seconds:.0f} s")
    lines.extend(
        f"  {p.base[:SHORT]} → {p.head[:SHORT]}: {p.state}, {probe_effect(p)}"
        for p in report.probes
    )
    return lines


def probe_effect(probe: BisectProbe) -> str:
    """``gpt step time +25.0 % (+20.0 … +31.0 %), 14 rounds, 41 s``."""
    if probe.ratio is None or probe.ci_low is None or probe.ci_high is None:
        return f"nothing compared, {probe.seconds:.0f} s"
    change = change_with_interval(probe.ratio, probe.ci_low, probe.ci_high, "lower")
    return f"{probe.workload} step time {change}, {probe.rounds} rounds, {probe.seconds:.0f} s"
