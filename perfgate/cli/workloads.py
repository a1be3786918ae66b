"""``perfgate workloads``: the workloads a selection can name."""

from __future__ import annotations

from perfgate.cli.console import console, guarded
from perfgate.cli.options import ConfigFile
from perfgate.config import load_config
from perfgate.report.terminal import PlainTable
from perfgate.runner.plan import available_workloads


def workloads_command(config: ConfigFile = None) -> None:
    """List the workloads (built-in and configured), their presets and knobs."""
    definitions = guarded(lambda: available_workloads(load_config(config)))
    table = PlainTable(title="workloads", title_justify="left")
    for header in ("name", "kind", "presets", "knobs (default)", "description"):
        table.add_column(header)
    for name, definition in sorted(definitions.items()):
        knobs = ", ".join(
            f"{k}={definition.default_knobs.get(k, spec.default)}"
            for k, spec in sorted(definition.knobs.items())
        )
        table.add_row(
            name, definition.kind, ", ".join(definition.presets), knobs, definition.description
        )
    console.print(table)
