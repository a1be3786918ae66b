"""The analytic power model of perfgate's compare rule: what a comparison can and cannot see.

``perfgate.stats.compare`` calls a *regression* only when the expanded bootstrap 90 % interval
of the pairwise (Hodges–Lehmann) ratio lies entirely above ``1 + threshold`` **and** the
(corrected) two-sided Mann–Whitney p-value is at most 0.05. Whether that can happen depends on
three numbers: the between-process noise, the repeats on each side and the threshold. This
module turns them into the answers a CI owner needs before trusting a gate:

- **Noise** ``sigma``: the sample standard deviation of ``log(value)`` over A/A repeats (one
  value per fresh process). On the log scale a 5 % slowdown is the same shift whatever the step
  time, and for small noise ``sigma`` ≈ the coefficient of variation.
- **Standard error** of the pairwise log ratio: the Hodges–Lehmann estimator has an asymptotic
  efficiency of 3/π against the mean on normal data, so ``se = sqrt(π/3) · sigma ·
  sqrt(1/n_base + 1/n_head)``.
- **Smallest detectable worsening** at a power ``1 - β``: the interval's lower end
  (estimate − q · se, with q the expanded interval's quantile, √f · t₀.₉₅ on
  2·(min n − 1) df, see ``perfgate.stats.compare.expanded_tail``) clears
  ``log(1 + threshold)`` with probability ``1 - β`` when the true log-effect is
  ``log(1 + threshold) + (q + t₁₋β,df) · se``, df = n_base + n_head − 2. It is
  infinite when the exact Mann–Whitney test cannot reach p ≤ 0.05 at those sizes however large
  the change: its smallest two-sided p is ``2 / C(n_base + n_head, n_base)`` (3 against 3: 0.1).
- **Recommended threshold**: the narrowest band inside which an A/A comparison's interval lands
  (verdict *no change*) 95 % of the time: ``log(1 + t) = (q + z₀.₉₇₅) · se``. A threshold
  below it turns identical code into *inconclusive* verdicts.

Pure functions of numbers (scipy for the quantiles); cross-checked against a Monte-Carlo run of
the real compare rule in ``tests/test_stats_power.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from perfgate.errors import UsageError
from perfgate.stats.compare import CONFIDENCE, expanded_tail

ALPHA = 0.05
"""The compare rule's significance level (its interval level is ``CONFIDENCE``)."""
DEFAULT_POWER = 0.95
HODGES_LEHMANN_FACTOR = math.sqrt(math.pi / 3)
"""Standard deviation of the Hodges–Lehmann shift relative to the difference of means, for
large normal samples (asymptotic relative efficiency 3/π ≈ 0.955)."""
DEFAULT_MAX_REPEATS = 200


def noise_sigma(values: Sequence[float]) -> float:
    """Between-process noise: sample standard deviation (ddof=1) of ``log(values)``.

    ``values`` are one number per repeat (e.g. each repeat's median steady step time). Logs make
    the noise a relative figure, independent of the unit and of the step time itself.
    """
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) < 2:
        raise UsageError(
            f"noise needs at least 2 repeat values, got {array.size}", "run more repeats"
        )
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise UsageError("noise needs finite, positive repeat values", "check the measured values")
    return float(np.std(np.log(array), ddof=1))


def log_ratio_se(sigma: float, n_base: int, n_head: int) -> float:
    """Standard error of the pairwise log ratio for noise ``sigma``:
    ``sqrt(π/3) · sigma · sqrt(1/n_base + 1/n_head)`` (the Hodges–Lehmann asymptotic variance)."""
    _check_sigma(sigma)
    _check_repeats(n_base, n_head)
    return HODGES_LEHMANN_FACTOR * sigma * math.sqrt(1 / n_base + 1 / n_head)


def min_detectable(
    sigma: float,
    n_base: int,
    n_head: int,
    threshold: float,
    power: float = DEFAULT_POWER,
) -> float:
    """Smallest relative worsening (0.12 = 12 %) flagged as a regression with probability
    ``power``; ``math.inf`` when the Mann–Whitney test can never reach p ≤ 0.05 at these sizes.

    ``exp(log(1 + threshold) + (q + t_power,df) · se) − 1``, df = n_base + n_head − 2, q the
    expanded interval's quantile.
    """
    _check_threshold(threshold)
    _check_power(power)
    se = log_ratio_se(sigma, n_base, n_head)
    log_effect = _log_min_detectable(math.log1p(threshold), se, n_base, n_head, power)
    return math.expm1(log_effect)


def recommended_threshold(sigma: float, n_base: int, n_head: int) -> float:
    """Narrowest threshold at which an A/A comparison ends *no change* with ~95 % probability:
    ``exp((q + z₀.₉₇₅) · se) − 1``; ``math.inf`` when a side has a single repeat.
    """
    se = log_ratio_se(sigma, n_base, n_head)
    if min(n_base, n_head) < 2:
        return math.inf
    return math.expm1(_log_recommended(se, n_base, n_head))


def repeats_needed(
    sigma: float,
    target: float,
    threshold: float,
    power: float = DEFAULT_POWER,
    max_repeats: int = DEFAULT_MAX_REPEATS,
) -> int | None:
    """Fewest equal repeats per side whose :func:`min_detectable` is at most ``target``.

    None when ``target <= threshold`` (a change inside the band is never a regression, whatever
    the repeats) or when even ``max_repeats`` a side is not enough.
    """
    _check_target(target)
    _check_threshold(threshold)
    if target <= threshold:
        return None
    return _fewest_repeats(
        lambda n: min_detectable(sigma, n, n, threshold, power) <= target, max_repeats
    )


def repeats_needed_tuned(
    sigma: float,
    target: float,
    power: float = DEFAULT_POWER,
    max_repeats: int = DEFAULT_MAX_REPEATS,
) -> int | None:
    """Fewest equal repeats per side that detect ``target`` when the threshold is set, for that
    many repeats, to :func:`recommended_threshold` (the narrowest band A/A runs pass).

    More repeats narrow both the interval and the band an A/A run needs, so this is the budget
    for catching a change smaller than today's threshold. None when beyond ``max_repeats``.
    """
    _check_target(target)
    _check_sigma(sigma)
    _check_power(power)
    log_target = math.log1p(target)

    def enough(n: int) -> bool:
        se = log_ratio_se(sigma, n, n)
        log_band = _log_recommended(se, n, n)
        return _log_min_detectable(log_band, se, n, n, power) <= log_target

    return _fewest_repeats(enough, max_repeats)


def minimum_repeats(comparisons: int = 1, alpha: float = ALPHA) -> int:
    """Fewest equal repeats a side at which one change among ``comparisons`` tested together
    can be significant at all: the exact Mann–Whitney test's smallest p must pass
    Benjamini–Hochberg's first step, p ≤ α / comparisons (3 a side can never reach 0.05; 5 a
    side reach 0.0079, enough for one workload's two tested metrics).
    """
    if comparisons < 1:
        raise UsageError(f"{comparisons} comparisons", "count at least one tested metric")
    n = 2
    while smallest_p(n, n) > alpha / comparisons:
        n += 1
    return n


def smallest_p(n_base: int, n_head: int) -> float:
    """The exact two-sided Mann–Whitney test's smallest p-value (complete separation)."""
    _check_repeats(n_base, n_head)
    return min(1.0, 2 / math.comb(n_base + n_head, n_base))


def _log_min_detectable(
    log_threshold: float, se: float, n_base: int, n_head: int, power: float
) -> float:
    from scipy import stats  # scipy.stats takes ~1 s to import: only when judging

    if smallest_p(n_base, n_head) > ALPHA or min(n_base, n_head) < 2:
        # A single repeat on a side: the interval spans every resample; no model applies.
        return math.inf
    df = n_base + n_head - 2
    quantiles = _interval_quantile(n_base, n_head) + stats.t.ppf(power, df)
    return log_threshold + float(quantiles) * se


def _log_recommended(se: float, n_base: int, n_head: int) -> float:
    from scipy import stats  # scipy.stats takes ~1 s to import: only when judging

    quantiles = _interval_quantile(n_base, n_head) + stats.norm.ppf(1 - ALPHA / 2)
    return float(quantiles) * se


def _interval_quantile(n_base: int, n_head: int) -> float:
    """How many standard errors the compare rule's expanded interval reaches on each side."""
    from scipy import stats  # scipy.stats takes ~1 s to import: only when judging

    tail = expanded_tail(n_base, n_head, CONFIDENCE)
    return math.inf if tail <= 0 else float(stats.norm.isf(tail))


def _fewest_repeats(enough: Callable[[int], bool], max_repeats: int) -> int | None:
    """Smallest n in [2, max_repeats] with ``enough(n)``; ``enough`` is monotone in n (more
    repeats never detect less: the standard error, the t quantiles and the smallest p all fall)."""
    if max_repeats < 2:
        raise UsageError(f"max_repeats {max_repeats} is below 2", "allow at least 2 repeats")
    if not enough(max_repeats):
        return None
    low, high = 2, max_repeats  # enough(high) holds; find the first n that does
    while low < high:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _check_sigma(sigma: float) -> None:
    if not (math.isfinite(sigma) and sigma >= 0):
        raise UsageError(f"noise {sigma!r} is not a finite, non-negative number", "re-calibrate")


def _check_repeats(n_base: int, n_head: int) -> None:
    if n_base < 1 or n_head < 1:
        raise UsageError(
            f"repeats ({n_base} baseline, {n_head} head) must be at least 1 a side",
            "run at least one repeat",
        )


def _check_threshold(threshold: float) -> None:
    if not 0 < threshold < 1:
        raise UsageError(f"threshold {threshold!r} is not in (0, 1)", "use e.g. 0.05")


def _check_target(target: float) -> None:
    if not (math.isfinite(target) and target > 0):
        raise UsageError(f"target {target!r} is not a positive change", "use e.g. 0.02 for 2 %")


def _check_power(power: float) -> None:
    if not 0 < power < 1:
        raise UsageError(f"power {power!r} is not in (0, 1)", "use e.g. 0.95")
