"""Diagnoses as a terminal table (``perfgate diagnose``): one row per workload with what bounds
it, how sure the classifier is, and the numbers that decided it."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from perfgate.documents.diagnosis import WorkloadDiagnosis
from perfgate.report.terminal import PlainTable


def diagnosis_table(path: Path, items: list[WorkloadDiagnosis]) -> Table:
    """One row per workload: what bounds it, how sure, and why (with the numbers)."""
    table = PlainTable(title=f"perfgate diagnose · {path}", title_justify="left")
    for header in ("workload", "bound by", "confidence", "why"):
        table.add_column(header)
    for item in items:
        found = item.diagnosis
        if found is None:
            status = Text(item.status, style="red")
            table.add_row(item.name, status, "", (item.error or "")[:120])
            continue
        source = "" if item.profiled else " (from the timed run only)"
        table.add_row(item.name, found.label, found.confidence, found.reason + source)
    return table
