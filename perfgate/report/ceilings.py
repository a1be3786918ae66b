"""Renderings of measured ceilings: the ``doctor --peak`` table and its ``--json`` document."""

from __future__ import annotations

from rich.table import Table

from perfgate import __version__
from perfgate.ceilings.bench import Ceilings, Measurement
from perfgate.documents.ceilings import CeilingsReport
from perfgate.report.formatting import format_bandwidth, format_tflops
from perfgate.report.terminal import PlainTable

_BANDWIDTH_LABELS = {
    "memory_copy": "memory copy (read + write)",
    "device_copy": "device memory copy (read + write)",
    "h2d_pinned": "host→device, pinned",
    "h2d_pageable": "host→device, pageable",
}


def _size(name: str, measurement: Measurement) -> str:
    if name.startswith("matmul"):
        return f"{measurement.size}×{measurement.size}"
    return f"{measurement.size / 2**20:.0f} MiB"


def ceilings_table(ceilings: Ceilings) -> Table:
    """One row per ceiling: median, spread over the samples, problem size."""
    title = (
        f"perfgate doctor --peak · {ceilings.device} ({ceilings.device_name or 'unknown'}) · "
        f"{ceilings.threads} thread(s) · {ceilings.wall_s:.1f} s"
    )
    table = PlainTable(title=title, title_justify="left")
    for header in ("ceiling", "median", "spread (min – max)", "samples", "size"):
        table.add_column(header, justify="left" if header == "ceiling" else "right")
    for dtype, m in ceilings.matmul.items():
        table.add_row(
            f"matmul {dtype}",
            format_tflops(m.median),
            f"{format_tflops(m.minimum)} – {format_tflops(m.maximum)}",
            str(len(m.samples)),
            _size("matmul", m),
        )
    for name, m in ceilings.bandwidth.items():
        table.add_row(
            _BANDWIDTH_LABELS.get(name, name),
            format_bandwidth(m.median),
            f"{format_bandwidth(m.minimum)} – {format_bandwidth(m.maximum)}",
            str(len(m.samples)),
            _size(name, m),
        )
    for what, reason in ceilings.unsupported.items():
        table.add_row(f"matmul {what}", "—", f"not measured: {reason}", "", "")
    return table


def ceilings_document(ceilings: Ceilings) -> CeilingsReport:
    """The ``--json`` document: the stored entry, with its key."""
    return CeilingsReport(
        perfgate_version=__version__,
        fingerprint_key=ceilings.fingerprint_key,
        measured_at=ceilings.measured_at,
        fingerprint=dict(ceilings.fingerprint),
        values=ceilings.values(),
    )
