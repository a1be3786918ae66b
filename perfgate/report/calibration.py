"""The calibration table the command prints: built here, printed by the CLI."""

from __future__ import annotations

import math

from rich.table import Table

from perfgate.calibration.explain import percent
from perfgate.documents.calibration import Calibration
from perfgate.report.formatting import format_seconds
from perfgate.report.terminal import PlainTable
from perfgate.stats.power import DEFAULT_MAX_REPEATS

LEGEND = (
    "between CV: SD of log repeat step times (what compare sees) · detectable @ N: smallest "
    "slowdown caught with 95 % power at perfgate run's N repeats a side",
    "recommended threshold: narrowest band identical code passes · repeats for the target: at "
    "the threshold in force / with the threshold tuned to those repeats",
)
"""Printed under the table: what each column means, in two lines that fit a CI log."""

HEADERS = (
    "workload",
    "step (median)",
    "within CV",
    "between CV",
    "threshold",
    "detectable @ {n}",
    "recommended threshold",
    "repeats for {target}",
    "… at a tuned threshold",
)


def calibration_table(calibrations: list[Calibration], device: str) -> Table:
    """One row per workload; columns from the first calibration's repeats and target."""
    first = calibrations[0] if calibrations else None
    table = PlainTable(
        title=f"perfgate calibrate · {device} · "
        f"{first.repeats if first else 0} A/A repeats per workload",
        title_justify="left",
    )
    for header in HEADERS:
        table.add_column(
            header.format(
                n=first.configured_repeats if first else "N",
                target=percent(first.target) if first else "target",
            ),
            justify="left" if header == "workload" else "right",
        )
    for calibration in calibrations:
        table.add_row(*calibration_row(calibration))
    return table


def calibration_row(calibration: Calibration) -> list[str]:
    """Formatted cells of one calibration (a dash for "never")."""
    return [
        f"{calibration.workload}@{calibration.preset}",
        format_seconds(calibration.step_median_s),
        percent(calibration.within_cv),
        percent(calibration.between_sigma),
        f"±{percent(calibration.threshold)}",
        _change(calibration.min_detectable),
        _band(calibration.recommended_threshold),
        "inside the band"
        if calibration.target <= calibration.threshold
        else _repeats(calibration.repeats_for_target),
        _repeats(calibration.repeats_for_target_tuned),
    ]


def _change(value: float) -> str:
    return "never" if math.isinf(value) else percent(value)


def _band(value: float) -> str:
    shown = percent(value)
    return shown if shown.startswith("≥") else f"±{shown}"


def _repeats(value: int | None) -> str:
    return f"> {DEFAULT_MAX_REPEATS}" if value is None else str(value)
