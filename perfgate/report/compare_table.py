"""The compare verdict for the terminal, laid out to its width.

A wide terminal gets one table row per workload and metric; a narrow one (a laptop's 80
columns, a CI log viewer) one block per metric, so that no number is cut to "0.01…". Every value
carries its unit, a metric recomputed from another (samples/s from the step time) sits under it,
and a rate's change is its own (throughput -20 %), not the step's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from perfgate.documents.verdict import CompareVerdict, MetricComparison, WorkloadVerdict
from perfgate.report.formatting import (
    change_with_interval,
    format_value,
    metric_label,
    mover_cells,
    work_change_text,
    work_summary,
)
from perfgate.report.terminal import PlainTable, indented

STYLE = {"regression": "red", "improvement": "green", "no_change": "", "inconclusive": "yellow"}
VERDICT_COLUMNS = 140
"""Below this width the verdict is printed as blocks: the table's ten columns need about 140."""


def verdict_table(verdict: CompareVerdict) -> Table:
    """Baseline vs head per metric, the change with its interval, threshold and verdict."""
    table = PlainTable(title=f"perfgate compare · {verdict.overall}", title_justify="left")
    for header in (
        "workload",
        "metric",
        "baseline",
        "head",
        "change (90% CI)",
        "threshold",
        "detectable",
        "p (BH)",
        "verdict",
        "why",
    ):
        table.add_column(header)
    for workload in verdict.workloads:
        if not workload.comparisons:
            status = workload.status.replace("_", " ")
            table.add_row(workload.name, "—", "—", "—", "—", "—", "—", "—", status, "")
        for c in _grouped(workload):
            table.add_row(
                workload.name,
                _metric_cell(c),
                format_value(c.metric, c.baseline_median),
                format_value(c.metric, c.head_median),
                change_with_interval(c.ratio, c.ci_low, c.ci_high, c.direction),
                f"±{c.threshold:.0%}",
                _detectable(c),
                f"{c.p_adjusted:.3g}" if c.p_adjusted is not None else "—",
                Text(c.verdict, style=STYLE.get(c.verdict, "")),
                "; ".join(c.reasons),
            )
        for note in workload.notes:
            table.add_row(workload.name, "", "", "", "", "", "", "", workload.status, note)
        if workload.work_changes:
            table.add_row(
                workload.name, "work per step", "", "", "", "exact", "", "",
                Text("work changed", style="yellow"), work_summary(workload.work_changes),
            )  # fmt: skip
        if workload.attribution is not None:
            moved = "; ".join(", ".join(mover_cells(m)) for m in workload.attribution.movers[:3])
            table.add_row(
                workload.name, "what moved", "", "", "", "", "", "", "profiled", moved
            )  # fmt: skip
    return table


class VerdictView:
    """The verdict as :func:`verdict_table` on a wide console, as blocks on a narrow one."""

    def __init__(self, verdict: CompareVerdict) -> None:
        self.verdict = verdict

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width >= VERDICT_COLUMNS:
            yield verdict_table(self.verdict)
            return
        yield Text(f"perfgate compare · {self.verdict.overall}", style="bold")
        for workload in self.verdict.workloads:
            for indent, text in _blocks(workload):
                yield from indented(text, indent, console, options.max_width)


def _blocks(workload: WorkloadVerdict) -> Iterator[tuple[int, Text]]:
    if not workload.comparisons:
        yield 0, Text(f"{workload.name}: {workload.status.replace('_', ' ')}")
    else:
        yield 0, Text(workload.name, style="bold")
    for c in _grouped(workload):
        indent = 4 if c.derived_from else 2
        line = Text(f"{_metric_cell(c).lstrip()}: ")
        line.append(c.verdict, style=STYLE.get(c.verdict, ""))
        line.append(
            f" · {format_value(c.metric, c.baseline_median)} → "
            f"{format_value(c.metric, c.head_median)}, "
            f"{change_with_interval(c.ratio, c.ci_low, c.ci_high, c.direction)}"
        )
        yield indent, line
        if c.derived_from:
            continue  # judged with its primary metric: the same test, not shown twice
        p = f", p (BH) {c.p_adjusted:.3g}" if c.p_adjusted is not None else ""
        detail = f"threshold ±{c.threshold:.0%}, detectable {_detectable(c)}{p}"
        yield indent + 2, Text(detail)
        if c.reasons:
            yield indent + 2, Text("why: " + "; ".join(c.reasons))
    for note in workload.notes:
        yield 2, Text(f"note: {note}")
    if workload.work_changes:
        line = Text("work per step: ")
        line.append("work changed", style="yellow")
        line.append(" (exact counts, no noise)")
        yield 2, line
        for change in workload.work_changes:
            yield 4, Text(work_change_text(change.counter, change.base, change.head))
    attribution = workload.attribution
    if attribution is not None:
        yield (
            2,
            Text(
                f"what moved (profiled, {attribution.windows} windows a side): step "
                f"{attribution.base_step_ms:.2f} → {attribution.head_step_ms:.2f} ms"
            ),
        )
        for mover in attribution.movers:
            yield 4, Text(", ".join(mover_cells(mover)))
        if attribution.omitted:
            yield 4, Text(f"{attribution.omitted} smaller movers not listed")


def _grouped(workload: WorkloadVerdict) -> list[MetricComparison]:
    """The comparisons with each derived metric right after the one it was derived from."""
    primary = [c for c in workload.comparisons if c.derived_from is None]
    derived = [c for c in workload.comparisons if c.derived_from is not None]
    ordered: list[MetricComparison] = []
    for c in primary:
        ordered.append(c)
        ordered.extend(d for d in derived if d.derived_from == c.metric)
    ordered.extend(d for d in derived if d not in ordered)  # its primary was not compared
    return ordered


def _metric_cell(c: MetricComparison) -> str:
    return f"  └ {metric_label(c.metric)}" if c.derived_from else metric_label(c.metric)


def _detectable(c: MetricComparison) -> str:
    return "never" if math.isinf(c.min_detectable) else f"{c.min_detectable:.1%}"
