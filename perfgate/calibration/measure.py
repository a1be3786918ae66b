"""A/A measurement: run each workload's repeats with the normal runner, then read the noise.

Two noises, because they call for different fixes:

- **within-process** (robust CV of the steady steps inside one repeat): what more *steps* would
  average away;
- **between-process** (standard deviation of log repeat medians): what only more *repeats*
  average away, and what the compare rule actually sees, since its unit is the repeat.

The repeats are measured exactly as ``perfgate run`` measures them (same plan, runner,
fingerprint and thread pinning), only more of them, so the noise is the gate's own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from perfgate.config import Config
from perfgate.documents.calibration import Calibration
from perfgate.documents.result import RunSettings, WorkloadResult
from perfgate.errors import UsageError
from perfgate.metrics import METRICS, metric_values
from perfgate.runner.device import resolve_device
from perfgate.runner.orchestrator import RunObserver, run_workloads, warm_launcher
from perfgate.runner.plan import Selection, prepare
from perfgate.stats.power import (
    min_detectable,
    noise_sigma,
    recommended_threshold,
    repeats_needed,
    repeats_needed_tuned,
)
from perfgate.telemetry.fingerprint import collect_fingerprint, fingerprint_key

ThresholdFor = Callable[[str, str], float]
"""(workload, metric) → practical threshold, e.g. ``Config.thresholds.threshold``."""
METRIC = "step_time_s"
MIN_REPEATS = 3
"""Fewer A/A repeats give a noise estimate on one degree of freedom: a guess, not a measure."""
MIN_STEPS = 4
"""The steady-state check keeps at least half the steps: 4 leave 2, the fewest with a spread."""
MAD_TO_SIGMA = 1.4826
"""Scales the median absolute deviation to a normal standard deviation."""


@dataclass(frozen=True, kw_only=True)
class CalibrationRun:
    """What ``perfgate calibrate`` measured: the calibrations, and the workloads that failed."""

    calibrations: list[Calibration]
    failures: list[WorkloadResult]
    """Workloads with a crashed, hung or raising repeat: they have no calibration."""


def default_threshold(workload: str, metric: str) -> float:
    """The built-in threshold of ``metric`` (no per-workload override)."""
    return METRICS[metric].threshold


def robust_cv(values: Sequence[float]) -> float:
    """``1.4826 · MAD / median``: a CV that one slow step (a page fault, a GC) cannot inflate."""
    center = statistics.median(values)
    spread = statistics.median(abs(v - center) for v in values)
    return MAD_TO_SIGMA * spread / center


def within_process_cv(workload: WorkloadResult) -> float:
    """Median over ok repeats of the robust CV of the repeat's steady steps."""
    cvs = [
        robust_cv(steady)
        for repeat in workload.repeats
        if repeat.status == "ok" and len(steady := repeat.step_times_s[repeat.steady_start :]) > 1
    ]
    if not cvs:
        raise UsageError(
            f"{workload.name}: no repeat has two steady steps to measure noise within",
            f"use --steps {MIN_STEPS} or more",
        )
    return statistics.median(cvs)


def calibrate_workload(
    workload: WorkloadResult,
    *,
    settings: RunSettings,
    environment_key: str,
    configured_repeats: int,
    threshold: float,
    target: float,
    created_at: str,
) -> Calibration:
    """The calibration of one workload measured cleanly: noises, then the power figures."""
    values = metric_values(workload).get(METRIC, [])
    sigma = noise_sigma(values)
    n = configured_repeats
    return Calibration(
        workload=workload.name,
        preset=workload.preset,
        definition_hash=workload.definition_hash,
        knobs=dict(workload.knobs),
        device=workload.device,
        environment_key=environment_key,
        created_at=created_at,
        repeats=len(values),
        steps=settings.steps,
        warmup=settings.warmup,
        step_median_s=statistics.median(values),
        within_cv=within_process_cv(workload),
        between_sigma=sigma,
        repeat_values_s=tuple(values),
        threshold=threshold,
        configured_repeats=n,
        min_detectable=min_detectable(sigma, n, n, threshold),
        recommended_threshold=recommended_threshold(sigma, n, n),
        target=target,
        repeats_for_target=repeats_needed(sigma, target, threshold),
        repeats_for_target_tuned=repeats_needed_tuned(sigma, target),
    )


def measure_calibrations(
    config: Config,
    selection: Selection,
    *,
    device: str,
    target: float,
    threshold_for: ThresholdFor = default_threshold,
    observer: RunObserver | None = None,
) -> CalibrationRun:
    """Run ``selection.repeats`` A/A repeats of each selected workload and calibrate each.

    The figures are computed for the repeats a plain ``perfgate run`` of the same selection
    would use (``selection`` without its repeats), since that is what the gate compares.
    """
    plan, settings = prepare(config, selection)
    _, configured = prepare(config, replace(selection, repeats=None))
    if settings.repeats < MIN_REPEATS:
        raise UsageError(
            f"calibration needs at least {MIN_REPEATS} repeats, got {settings.repeats}",
            "use --repeats 10 or more",
        )
    if settings.steps < MIN_STEPS:
        raise UsageError(
            f"calibration needs at least {MIN_STEPS} measured steps, got {settings.steps}",
            f"use --steps {MIN_STEPS} or more",
        )
    device = resolve_device(device)
    with warm_launcher(plan, settings, device) as launcher:
        environment = collect_fingerprint(device, settings.threads)
        created_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        results = run_workloads(plan, settings, device, environment, observer, launcher=launcher)
    calibrations = [
        calibrate_workload(
            result,
            settings=settings,
            environment_key=fingerprint_key(environment),
            configured_repeats=configured.repeats,
            threshold=threshold_for(result.name, METRIC),
            target=target,
            created_at=created_at,
        )
        for result in results
        if result.status == "ok"
    ]
    return CalibrationRun(
        calibrations=calibrations, failures=[r for r in results if r.status != "ok"]
    )


def parse_target(text: str) -> float:
    """``--target`` text (``2%`` or ``2``, both percent, as in ``--inject-slowdown``) as a
    fraction (0.02); 0 < N < 100."""
    number = text.strip().removesuffix("%").strip()
    try:
        percent = float(number)
    except ValueError:
        percent = math.nan
    if not 0 < percent < 100:  # also rejects nan and inf
        raise UsageError(
            f"--target {text!r} is not a percentage in (0, 100)", "write e.g. --target 2%"
        )
    return percent / 100
