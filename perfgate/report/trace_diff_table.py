"""A trace diff as a terminal table (``perfgate advise --trace AFTER --before BEFORE``): the
ops and kernels that moved per step, the largest change of step time first."""

from __future__ import annotations

from rich.table import Table

from perfgate.documents.trace_diff import TraceDiff
from perfgate.report.formatting import signed_percent
from perfgate.report.terminal import PlainTable

NAME_WIDTH = 60
"""Kernel names run to hundreds of characters of template arguments; the start tells them
apart (the JSON document keeps them whole)."""


def trace_diff_table(diff: TraceDiff) -> Table:
    """Every listed mover with its calls and time per step on both sides and its part of the
    step's change."""
    before, after = diff.before, diff.after
    step = f"{before.step_ms:.3g} ms → {after.step_ms:.3g} ms"
    table = PlainTable(
        title=f"perfgate advise · changes per step since {before.path} · step {step} "
        f"({signed_percent(1.0 + diff.step_change)})",
        title_justify="left",
        caption=f"{diff.omitted} smaller movers not listed" if diff.omitted else None,
        caption_justify="left",
    )
    for header in ("change", "", "name", "calls/step", "time/step", "of the step"):
        table.add_column(header)
    for change in diff.changes:
        table.add_row(
            change.change,
            change.side,
            shorten(change.name),
            f"{_calls(change.before_calls)} → {_calls(change.after_calls)}",
            f"{_us(change.before_us)} → {_us(change.after_us)}",
            signed_percent(1.0 + change.step_share),
        )
    return table


def shorten(name: str, width: int = NAME_WIDTH) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _calls(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _us(value: float) -> str:
    if value >= 1000.0:
        return f"{value / 1000.0:.3g} ms"
    return f"{value:.3g} µs"
