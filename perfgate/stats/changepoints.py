"""Change points in a benchmark history: where the level stepped, and by how much.

Method (deterministic: no random permutations, no random starts; same input, same output)
----------------------------------------------------------------------------------------
1. **Log-values.** Detection runs on ``log(value)``, so a step is a ratio: +10 % is the same step
   at 3 ms or at 3 s (scale invariance), and a 3× stall is ``log 3 ≈ 1.1`` away, not 200 %.
2. **Robust noise scale.** ``σ = median(|Δ log value|) / (0.6745·√2)``: the median absolute
   first difference, scaled to a normal standard deviation. Differencing cancels the level, so
   real steps do not inflate σ; the median ignores rare stalls.
3. **Kernel change-point detection** (Arlot, Celisse & Harchaoui, JMLR 2019) with ruptures'
   ``KernelCPD``: Gaussian (RBF) kernel of bandwidth 2σ, exact PELT search in C, penalty
   ``log(n)`` per change point, ``min_size=min_segment``. The RBF kernel is bounded: a point far
   from its neighbours costs about 1 wherever it is put, so cutting a spike out into a segment
   of its own never pays, while a shift of a few σ sustained over many points does. The minimum
   segment length applies to the first and the last segment too, so a change in the newest
   ``min_segment - 1`` points is not reported yet.
4. **Significance and size** (the merge step of Hunter/Apache Otava, Fleming et al., ICPE 2023):
   each step is tested with a two-sided Mann–Whitney U test between the segments either side of
   it (rank-based, so stalls cannot fake or hide a shift) and must move the median by at least
   ``min_relative_change``. While some step fails, the weakest (largest p, then smallest change)
   is dropped and the others are re-tested, since the segments around it just grew.

Why ruptures rather than apache-otava (E-divisive means with a Student t-test)
-----------------------------------------------------------------------------
Measured on Python 3.11 with apache-otava 0.8.0 and ruptures 1.1.10:

* otava pins ``numpy==2.2.*`` and ``scipy<1.17`` (this project resolves numpy 2.4 and scipy 1.17)
  and installs about 40 packages (google-cloud-bigquery, grpcio, pg8000, slack-sdk, cryptography);
  ruptures needs only numpy and scipy, which perfgate already has.
* otava's t-test mode has no minimum segment length: a 3× spike on the first or the last point
  was reported as a change point, and 4 of 20 pure-noise series (200 points, 2 % and 10 % CV)
  got a spurious one at p ≤ 0.001. Enforcing ``min_segment`` around it would mean re-writing its
  merge step; with ruptures it is the ``min_size`` argument.
* This module: no change point in 300 pure-noise series of 200 points at 2 % CV, 300 at 10 % CV,
  and 600 at 10 % CV with 3 % or 8 % of runs stalled 5×; a +10 % step after 30 points at 2 % CV
  is placed at exactly index 30 in 296 of 300 seeds (the other 4 are off by one: noise moved the
  boundary point past the middle of the step, so it fits the other level better); both steps of
  a +10 %/−9 % bump at exactly 40 and 80 in 288 of 300. About 1 ms per 200-point history,
  7 ms per 1000; ruptures imports only numpy and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ruptures
from numpy.typing import NDArray
from scipy.stats import mannwhitneyu

from perfgate.errors import UsageError

#: Median absolute value of a difference of two N(0, σ²) draws, in units of σ.
_MEDIAN_ABS_DIFF_PER_SIGMA = 0.6744897501960817 * math.sqrt(2.0)

#: Kernel bandwidth in noise σ: narrow enough that a 10 % step at 2 % CV reads as "different",
#: wide enough that ordinary noise reads as "same". Calibrated by simulation with the penalty
#: over 1-3 σ and 0.5-3 log(n): 1 σ misplaced more steps, penalties under log(n) let pure noise
#: through, larger ones lost smaller steps; 2 σ with log(n) had no false alarm and the most exact
#: positions.
_BANDWIDTH_SIGMAS = 2.0


@dataclass(frozen=True)
class ChangePoint:
    """A step in the level of a history.

    ``p_value`` is the two-sided Mann–Whitney U p-value of the segment before against the segment
    after. It is nominal: the step's position was chosen to separate the segments best, so it
    overstates the evidence; the detector's penalty is what keeps pure noise quiet, the test is a
    second gate.
    """

    index: int  # first index of the new segment (values[index] is the first point after the step)
    median_before: float  # median of the segment before
    median_after: float  # median of the segment after
    relative_change: float  # median_after / median_before - 1
    p_value: float | None  # significance of the step if the method gives one, else None


def find_change_points(
    values: Sequence[float],
    *,
    min_segment: int = 5,
    max_p_value: float = 0.001,
    min_relative_change: float = 0.02,
) -> list[ChangePoint]:
    """Change points in chronological order.

    Kernel change-point detection on log-values with a robust noise scale, then a Mann–Whitney U
    test and a minimum median change per step (see the module docstring). Every segment, the
    first and the last included, has at least ``min_segment`` points. Fewer than
    ``2 * min_segment`` values, or a constant history, give no change points.

    Raises ``UsageError`` for NaN, infinite or non-positive values, ``min_segment < 2``,
    ``max_p_value`` outside (0, 1] or a negative ``min_relative_change``.
    """
    history = _validated(values, min_segment, max_p_value, min_relative_change)
    if len(history) < 2 * min_segment:
        return []
    logs = np.log(history)
    sigma = _noise_scale(logs)
    if sigma == 0.0:
        return []
    detector = ruptures.KernelCPD(
        kernel="rbf",
        min_size=min_segment,
        params={"gamma": 1.0 / (2.0 * (_BANDWIDTH_SIGMAS * sigma) ** 2)},
    )
    segment_ends = detector.fit(logs).predict(pen=math.log(len(logs)))
    return _significant_steps(history, segment_ends[:-1], max_p_value, min_relative_change)


def newest_stable_segment(
    values: Sequence[float], change_points: Sequence[ChangePoint]
) -> tuple[int, int]:
    """(start, end) half-open index range of the newest segment.

    The newest segment starts at the last change point (or at 0 without one) and runs to the end
    of the history: the points a baseline should be computed from.
    """
    end = len(values)
    if not change_points:
        return 0, end
    start = change_points[-1].index
    if not 0 < start < end:
        raise UsageError(
            f"change point at index {start} is outside a history of {end} values",
            "pass the change points that find_change_points returned for these values",
        )
    return start, end


def _validated(
    values: Sequence[float], min_segment: int, max_p_value: float, min_relative_change: float
) -> NDArray[np.float64]:
    """The history as a float array, or a one-line ``UsageError`` naming what is wrong."""
    if min_segment < 2:
        raise UsageError(
            f"min_segment must be at least 2, got {min_segment}",
            "a one-point segment is a spike, not a level",
        )
    if not 0.0 < max_p_value <= 1.0:
        raise UsageError(f"max_p_value must be in (0, 1], got {max_p_value}")
    if min_relative_change < 0.0:
        raise UsageError(f"min_relative_change must be ≥ 0, got {min_relative_change}")
    history = np.asarray(values, dtype=np.float64)
    if history.ndim != 1:
        raise UsageError(f"values must be a flat sequence of numbers, got shape {history.shape}")
    finite = np.isfinite(history)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise UsageError(
            f"benchmark history has a non-finite value ({history[bad]}) at index {bad}",
            "drop failed or missing runs before looking for change points",
        )
    if (history <= 0.0).any():
        bad = int(np.flatnonzero(history <= 0.0)[0])
        raise UsageError(
            f"benchmark history has a non-positive value ({history[bad]}) at index {bad}",
            "change points are found on log-values, so every value must be > 0",
        )
    return history


def _noise_scale(logs: NDArray[np.float64]) -> float:
    """Robust σ of the noise on log-values, from first differences (0 only when constant).

    When over half of consecutive values are equal (quantised timings, noise-free synthetic
    steps) the median difference is 0; the mean absolute difference is then the smallest honest
    scale, and it is 0 only for a constant history.
    """
    differences = np.abs(np.diff(logs))
    median = float(np.median(differences))
    if median > 0.0:
        return median / _MEDIAN_ABS_DIFF_PER_SIGMA
    return float(np.mean(differences))


def _significant_steps(
    history: NDArray[np.float64],
    candidates: Sequence[int],
    max_p_value: float,
    min_relative_change: float,
) -> list[ChangePoint]:
    """The candidates that pass both gates, dropping the weakest failure until none fails."""
    kept = [int(index) for index in candidates]
    while True:
        bounds = [0, *kept, len(history)]
        tested = [_step(history, bounds[i], bounds[i + 1], bounds[i + 2]) for i in range(len(kept))]
        failures = [
            (p_value, -abs(step.relative_change), step.index)
            for p_value, step in tested
            if p_value > max_p_value or abs(step.relative_change) < min_relative_change
        ]
        if not failures:
            return [step for _, step in tested]
        kept.remove(max(failures)[2])


def _step(
    history: NDArray[np.float64], start: int, index: int, end: int
) -> tuple[float, ChangePoint]:
    """The step at ``index`` between segments ``[start, index)`` and ``[index, end)``, and its p."""
    before, after = history[start:index], history[index:end]
    median_before, median_after = float(np.median(before)), float(np.median(after))
    p_value = float(mannwhitneyu(before, after, alternative="two-sided").pvalue)
    return p_value, ChangePoint(
        index=index,
        median_before=median_before,
        median_after=median_after,
        relative_change=median_after / median_before - 1.0,
        p_value=p_value,
    )
