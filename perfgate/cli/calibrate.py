"""``perfgate calibrate``: thin command over ``perfgate.calibration``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

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
from perfgate.config import Config, load_config
from perfgate.runner.plan import Selection

if TYPE_CHECKING:
    from perfgate.calibration.measure import CalibrationRun


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
    from perfgate.calibration.measure import parse_target
    from perfgate.calibration.report import LEGEND, calibration_table
    from perfgate.cli.console import console, errors, guarded, say
    from perfgate.documents.calibration import CALIBRATION, CalibrationReport
    from perfgate.errors import ExitCode
    from perfgate.files import write_json_atomic

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
    loaded, measured = guarded(lambda: _measure(config, selection, device, goal, json_out))
    calibrations = measured.calibrations
    if calibrations:
        console.print(calibration_table(calibrations, calibrations[0].device))
        for line in LEGEND:
            say(line)
    if json_out is not None:
        document = CALIBRATION.dump(CalibrationReport(calibrations=list(calibrations)))
        guarded(lambda: write_json_atomic(json_out, document, option="--json"))
        say(f"calibration: {json_out}")
    if calibrations and not no_store:
        say(f"stored in {guarded(lambda: _store(loaded, measured))}")
    for failed in measured.failures:
        say(
            f"{failed.name}: {failed.status} — {failed.error or 'no detail'}",
            to=errors,
        )
    if measured.failures:
        raise typer.Exit(int(ExitCode.INFRASTRUCTURE))


def _measure(
    config_path: Path | None,
    selection: Selection,
    device: str | None,
    target: float,
    json_out: Path | None,
) -> tuple[Config, CalibrationRun]:
    from perfgate.calibration.measure import measure_calibrations
    from perfgate.cli.console import console
    from perfgate.cli.progress import RunProgress
    from perfgate.files import check_writable

    config = load_config(config_path)
    if json_out is not None:
        check_writable(json_out, "--json")  # before minutes of measuring, not after
    with RunProgress(console) as progress:
        measured = measure_calibrations(
            config,
            selection,
            device=device or config.device,
            target=target,
            threshold_for=config.thresholds.threshold,
            observer=progress,
        )
    return config, measured


def _store(config: Config, measured: CalibrationRun) -> str:
    """Store the calibrations; what was printed (and written) stays whatever happens here."""
    from perfgate.calibration.store import save_calibrations
    from perfgate.errors import InfrastructureError
    from perfgate.store.engine import StoreUnavailable, masked_url

    try:
        save_calibrations(config.database_url, config.root, measured.calibrations)
    except StoreUnavailable as exc:
        raise InfrastructureError(
            f"the database {masked_url(config.database_url)} could not store the calibrations "
            f"({exc})",
            "fix the database (perfgate db upgrade?) and calibrate again, or pass --no-store",
        ) from None
    return masked_url(config.database_url)
