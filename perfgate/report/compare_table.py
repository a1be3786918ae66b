"""The compare verdict as a terminal table: one row per workload and metric."""

from __future__ import annotations

import math

from rich.table import Table
from rich.text import Text

from perfgate.documents.verdict import CompareVerdict
from perfgate.report.terminal import PlainTable

STYLE = {"regression": "red", "improvement": "green", "no_change": "", "inconclusive": "yellow"}


def verdict_table(verdict: CompareVerdict) -> Table:
    """Baseline vs head per metric, the effect with its interval, threshold and verdict."""
    table = PlainTable(title=f"perfgate compare · {verdict.overall}", title_justify="left")
    for header in (
        "workload",
        "metric",
        "baseline",
        "head",
        "ratio (90% CI)",
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
        for c in workload.comparisons:
            label = Text(c.verdict, style=STYLE.get(c.verdict, ""))
            detectable = "never" if math.isinf(c.min_detectable) else f"{c.min_detectable:.1%}"
            table.add_row(
                workload.name,
                c.metric,
                f"{c.baseline_median:.4g}",
                f"{c.head_median:.4g}",
                f"{c.ratio:.3f} ({c.ci_low:.3f}–{c.ci_high:.3f})",
                f"±{c.threshold:.0%}",
                detectable,
                f"{c.p_adjusted:.3g}" if c.p_adjusted is not None else "—",
                label,
                "; ".join(c.reasons),
            )
        for note in workload.notes:
            table.add_row(workload.name, "", "", "", "", "", "", "", workload.status, note)
    return table
