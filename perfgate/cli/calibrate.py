"""``perfgate calibrate``: thin command over ``perfgate.calibration``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, errors, guarded, say
from perfgate.cli.options import (
    ConfigFile,
    Device,
    Knobs,
    Preset,
    Seed,
    Steps,
    Suite,
    Threads,
    Timeout,
    Warmup,
    Workloads,
    build_selection,
)
from perfgate.errors import ExitCode


def calibrate_command(
    suite: Suite = None,
    workload: Workloads = [],
    preset: Preset = None,
    repeats: int = typer.Option(10, help="A/A repeats (fresh processes) per workload"),
    steps: Steps = None,
    warmup: Warmup = None,
    device: Device = None,
    knob: Knobs = [],
    timeout: Timeout = None,
    threads: Threads = None,
    seed: Seed = None,
    target: str = typer.Option("2%", help="the slowdown you want caught, e.g. 2%"),
    no_store: bool = typer.Option(False, "--no-store", help="print (and --json) only, no database"),
    json_out: Path | None = typer.Option(None, "--json", help="write the calibration JSON here"),
    config: ConfigFile = None,
) -> None:
    """A/A repeats of each workload: its noise, and the regressions the gate can detect."""
    from perfgate.calibration.measure import parse_target  # lazy: the A/A statistics, to calibrate
    from perfgate.calibration.session import (  # lazy: the measuring stack, to calibrate
        CalibrateRequest,
        calibrate_session,
        store_calibrations,
        write_calibrations,
    )
    from perfgate.cli.progress import RunProgress  # lazy: rich's progress display, to measure
    from perfgate.report.calibration import (  # lazy: the A/A statistics, to calibrate
        LEGEND,
        calibration_table,
    )

    goal = guarded(lambda: parse_target(target))
    selection = guarded(
        lambda: build_selection(
            suite=suite,
            workloads=workload,
            preset=preset,
            knobs=knob,
            repeats=repeats,
            steps=steps,
            warmup=warmup,
            timeout=timeout,
            threads=threads,
            seed=seed,
        )
    )
    request = CalibrateRequest(
        config=config, selection=selection, device=device, target=goal, json_out=json_out
    )
    outcome = guarded(lambda: calibrate_session(request, lambda: RunProgress(console)))
    measured = outcome.measured
    calibrations = measured.calibrations
    if calibrations:
        console.print(calibration_table(calibrations, calibrations[0].device))
        for line in LEGEND:
            say(line)
    if json_out is not None:
        guarded(lambda: write_calibrations(json_out, calibrations))
        say(f"calibration: {json_out}")
    if calibrations and not no_store:
        say(f"stored in {guarded(lambda: store_calibrations(outcome))}")
    for failed in measured.failures:
        say(
            f"{failed.name}: {failed.status} — {failed.error or 'no detail'}",
            to=errors,
        )
    if measured.failures:
        raise typer.Exit(int(ExitCode.INFRASTRUCTURE))
