"""Default thresholds from a calibration: as tight as this machine's measured noise allows.

A fixed 5 % band is too wide for a quiet GPU — a true +2 % slowdown, real money on a fleet,
passes silently — and too narrow for some CPU runners. When a workload has been calibrated on
this environment (``perfgate calibrate``) and the configuration sets no step-time threshold for
it, its band becomes the narrowest one that identical code passes (*no change*) 95 % of the time
within the interleaved A/B's round budget (``perfgate.stats.sequential.narrowest_band``),
floored at 1 %: below that, clock and thermal state move a GPU step more than any calibration
of a few minutes can promise. A threshold set in ``[tool.perfgate.thresholds]`` always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from perfgate.documents.calibration import Calibration
from perfgate.stats.sequential import narrowest_band, sequential_design
from perfgate.thresholds import Thresholds

FLOOR = 0.01
"""The tightest calibrated band (1 %)."""
CEILING = 0.5
"""Thresholds are relative changes below 1; a band this wide says the machine cannot judge."""


def calibrated_thresholds(
    thresholds: Thresholds, calibrations: Mapping[str, Calibration], max_rounds: int
) -> tuple[Thresholds, dict[str, str]]:
    """``thresholds`` with calibrated step-time bands for the workloads that have a
    calibration and no configured band, and one note per such workload saying so."""
    design = sequential_design(max_rounds)
    bands: dict[str, float] = {}
    notes: dict[str, str] = {}
    for name, calibration in calibrations.items():
        if thresholds.configured(name, "step_time_s") is not None:
            continue
        band = min(max(narrowest_band(calibration.between_sigma, design), FLOOR), CEILING)
        bands[name] = band
        notes[name] = (
            f"threshold ±{band:.1%} from the calibration of {calibration.created_at[:10]} "
            f"(between-process noise {calibration.between_sigma:.1%}: the narrowest band "
            f"identical code passes within {max_rounds} interleaved rounds, floored at "
            f"{FLOOR:.0%}); set step_time_s in [tool.perfgate.thresholds] to choose another"
        )
    if not bands:
        return thresholds, {}
    return replace(thresholds, calibrated={**thresholds.calibrated, **bands}), notes
