"""``perfgate doctor``: thin command over ``perfgate.doctor``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, guarded, say
from perfgate.cli.options import ConfigFile
from perfgate.config import load_config
from perfgate.report.terminal import PlainTable


def doctor_command(
    peak: bool = typer.Option(
        False, "--peak", help="measure this machine's ceilings (matmul, bandwidth) and store them"
    ),
    device: str = typer.Option("auto", help="--peak: cpu, cuda or auto"),
    threads: int | None = typer.Option(
        None, help="intra-op CPU threads (default: config, else physical cores, as run pins)"
    ),
    json_out: Path | None = typer.Option(None, "--json", help="--peak: also write them here"),
    config: ConfigFile = None,
) -> None:
    """What this machine can measure (GPU, NVML, clocks, torch build) and what it can't;
    with --peak, its measured ceilings."""
    from rich.text import Text

    from perfgate.doctor import doctor_session  # lazy: the machine probes (NVML, torch)

    if peak:
        _doctor_peak(device, threads, json_out, config)
        return
    capabilities = guarded(lambda: doctor_session(config, threads))
    table = PlainTable(title="perfgate doctor", title_justify="left")
    table.add_column("capability")
    table.add_column("status")
    table.add_column("detail")
    mark = {
        True: Text("yes", style="green"),
        False: Text("no", style="red"),
        None: Text("n/a", style="yellow"),
    }
    for capability in capabilities:
        table.add_row(capability.name, mark[capability.ok], capability.detail)
    console.print(table)


def _doctor_peak(
    device: str, threads: int | None, json_out: Path | None, config_path: Path | None
) -> None:
    """``doctor --peak``: measure, store per fingerprint, print the table and where."""
    from perfgate.doctor import doctor_peak  # lazy: the ceilings benchmarks, for --peak
    from perfgate.report.ceilings import ceilings_table  # lazy: their renderer, for --peak

    outcome = guarded(lambda: doctor_peak(load_config(config_path), device, threads, json_out))
    console.print(ceilings_table(outcome.ceilings))
    key = outcome.ceilings.fingerprint_key[:12]
    say(f"stored in {outcome.path} (environment {key})")
    if json_out is not None:
        say(f"written to {json_out}")
