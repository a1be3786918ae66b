"""``perfgate calibrate`` as library calls: A/A repeats of each workload measured under the
caller's progress, the calibrations written as a document, and stored.

Storing is a call of its own, made after the calibrations were shown and written, so what was
printed stays whatever happens to the database; the database stack loads only then.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.calibration.measure import CalibrationRun, measure_calibrations
from perfgate.config import Config, load_config
from perfgate.documents.calibration import CALIBRATION, Calibration, CalibrationReport
from perfgate.errors import InfrastructureError
from perfgate.files import check_writable, write_json_atomic
from perfgate.run import RunWatch
from perfgate.runner.plan import Selection


@dataclass(frozen=True, kw_only=True)
class CalibrateRequest:
    """What ``perfgate calibrate`` is asked to measure, and where its document will go."""

    config: Path | None = None
    """The configuration file; None: the nearest perfgate.toml or pyproject.toml upwards."""
    selection: Selection = field(default_factory=Selection)
    """The workloads, with the A/A repeats each gets."""
    device: str | None = None
    """cpu, cuda or auto; None: the configuration's."""
    target: float
    """The slowdown to be caught, as a fraction (``parse_target``)."""
    json_out: Path | None = None
    """Where the calibrations will be written: checked before anything is measured."""


@dataclass(frozen=True, kw_only=True)
class CalibrateOutcome:
    """The calibrations (and failed workloads), and the configuration that stores them."""

    config: Config
    measured: CalibrationRun


def calibrate_session(
    request: CalibrateRequest, progress: RunWatch = nullcontext
) -> CalibrateOutcome:
    """Read the configuration, check ``json_out`` (before minutes of measuring, not after),
    and measure the A/A repeats under ``progress``."""
    config = load_config(request.config)
    if request.json_out is not None:
        check_writable(request.json_out, "--json")  # before minutes of measuring, not after
    with progress() as observer:
        measured = measure_calibrations(
            config,
            request.selection,
            device=request.device or config.device,
            target=request.target,
            threshold_for=config.thresholds.threshold,
            observer=observer,
        )
    return CalibrateOutcome(config=config, measured=measured)


def write_calibrations(path: Path, calibrations: Sequence[Calibration]) -> None:
    """The calibration document (``--json``)."""
    document = CALIBRATION.dump(CalibrationReport(calibrations=list(calibrations)))
    write_json_atomic(path, document, option="--json")


def store_calibrations(outcome: CalibrateOutcome) -> str:
    """Store the calibrations in the configuration's database; where (password masked)."""
    from perfgate.store.calibration import (  # lazy: the database stack, only when storing
        save_calibrations,
    )
    from perfgate.store.engine import (  # lazy: the database stack, only when storing
        StoreUnavailable,
        masked_url,
    )

    config = outcome.config
    try:
        save_calibrations(config.database_url, config.root, outcome.measured.calibrations)
    except StoreUnavailable as exc:
        raise InfrastructureError(
            f"the database {masked_url(config.database_url)} could not store the calibrations "
            f"({exc})",
            "fix the database (perfgate db upgrade?) and calibrate again, or pass --no-store",
        ) from None
    return masked_url(config.database_url)
