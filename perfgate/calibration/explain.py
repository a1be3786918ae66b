"""Why a comparison was inconclusive, in one sentence a PR author can act on.

An inconclusive verdict usually means the comparison could not see a change of the threshold's
size with so few repeats on so noisy a machine. A calibration of the workload turns that into
numbers: the noise, the smallest change these repeats could detect, and the repeats that would
detect a useful change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from perfgate.documents.calibration import Calibration
from perfgate.documents.verdict import CompareVerdict, MetricComparison
from perfgate.stats.power import min_detectable, recommended_threshold, repeats_needed

TIMING_METRICS = frozenset({"step_time_s", "samples_per_s", "tokens_per_s", "tflops", "mfu"})
"""Metrics that are a constant over the step time: their log-noise is the step time's, so a
step-time calibration applies to them (peak memory has a noise of its own)."""


def explain_inconclusive(
    comparison: MetricComparison, calibration: Calibration | None
) -> str | None:
    """One sentence for an inconclusive timing comparison; None for any other verdict or for
    a metric the calibration does not cover."""
    if comparison.verdict != "inconclusive" or comparison.metric not in TIMING_METRICS:
        return None
    if comparison.method == "sequential" or comparison.derived_from is not None:
        return None  # a sequential A/B says itself how many rounds would decide
    if calibration is None:
        return (
            "no calibration of this workload on this machine: `perfgate calibrate` measures its "
            "noise and the repeats a conclusive verdict needs"
        )
    sigma = calibration.between_sigma
    n_base, n_head = comparison.baseline_repeats, comparison.head_repeats
    threshold = comparison.threshold
    parts = [
        f"calibration {calibration.created_at[:10]}: between-process noise {percent(sigma)}",
        _detectable(sigma, n_base, n_head, threshold),
    ]
    band = recommended_threshold(sigma, n_base, n_head)
    if threshold < band:
        parts.append(
            f"identical code needs a ±{percent(band)} threshold to pass at these repeats "
            f"(it is ±{percent(threshold)})"
        )
    parts.append(_advice(sigma, threshold, calibration.target))
    return "; ".join(parts) + " (perfgate calibrate)"


def annotate_inconclusive(
    verdict: CompareVerdict, calibrations: Mapping[str, Calibration]
) -> CompareVerdict:
    """The verdict with one explaining note per workload that has an inconclusive timing
    metric (they share one noise, so one sentence covers them all)."""
    workloads = []
    for workload in verdict.workloads:
        calibration = calibrations.get(workload.name)
        sentence = next(
            (
                text
                for comparison in workload.comparisons
                if (text := explain_inconclusive(comparison, calibration)) is not None
            ),
            None,
        )
        workloads.append(
            replace(workload, notes=[*workload.notes, sentence]) if sentence else workload
        )
    return replace(verdict, workloads=workloads)


def percent(value: float) -> str:
    """``6.1 %`` below ten percent, ``31 %`` above, ``≥ 1000 %`` beyond (a figure that large
    only says "hopeless": its digits would be noise)."""
    shown = value * 100
    if shown >= 1000:  # also inf
        return "≥ 1000 %"
    return f"{shown:.1f} %" if shown < 10 else f"{shown:.0f} %"


def _repeats_phrase(n_base: int, n_head: int) -> str:
    if n_base == n_head:
        return f"{n_base} repeats a side"
    return f"{n_base} baseline and {n_head} head repeats"


def _detectable(sigma: float, n_base: int, n_head: int, threshold: float) -> str:
    smallest = min_detectable(sigma, n_base, n_head, threshold)
    where = f"at {_repeats_phrase(n_base, n_head)}"
    if math.isinf(smallest):
        return f"{where} the test can never reach p ≤ 0.05, whatever the change"
    return f"{where} the smallest detectable change is {percent(smallest)}"


def _advice(sigma: float, threshold: float, target: float) -> str:
    """Repeats that would detect the calibration's target, or twice the threshold when the
    target lies inside the band (a change inside it is never a regression)."""
    goal = target if target > threshold else 2 * threshold
    needed = repeats_needed(sigma, goal, threshold)
    if needed is None:
        return (
            f"no repeat count up to 200 a side would detect {percent(goal)}: "
            "quieten the runner or widen the threshold"
        )
    return f"{needed} repeats a side would detect {percent(goal)}"
