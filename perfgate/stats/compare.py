"""The regression decision for one metric, and the correction across all of them.

Method (pure functions, repeats in, verdict objects out):

- **Unit**: the repeat. Each side is the per-repeat values of one metric (e.g. each repeat's
  median steady step time); steps never enter here.
- **Effect**: the ratio head to baseline as the median over all pairs of repeats of their
  ratio (the Hodges–Lehmann estimate on the log scale), expressed so that > 1 is *worse*
  whatever the metric's direction (head/base for lower-is-better step time, base/head for
  throughput), with a seeded percentile-bootstrap interval over the repeats. With the 4–10
  repeats a CI job affords, the plain ratio of medians is hostage to the second-largest value
  of each side — one slow process in six widened an A/A interval on this CPU to +24 % — while
  the pairwise median needs a third of a side to move before it does (and keeps 95 % of the
  mean's efficiency on clean data, against 64 % for the median). The medians themselves are
  reported beside it.
- **Significance**: two-sided Mann–Whitney U (exact for small samples), p-values of all
  workloads × metrics corrected together with Benjamini–Hochberg
  (``scipy.stats.false_discovery_control``).
- **Verdict**: *regression* only when the whole interval lies beyond the practical threshold
  (ratio > 1 + t) **and** the corrected test agrees; *improvement* symmetrically
  (ratio < 1/(1 + t));
  *no change* when the interval lies inside the band; otherwise *inconclusive* — also whenever a
  side was measured on a throttled GPU or has too few repeats for the test to ever reach
  significance, and when a side is bimodal or too noisy unless the interval clears the band
  anyway (see :func:`decide`). Every comparison reports the smallest change it could have
  detected.

The bootstrap is written out (a few lines of numpy) rather than taken from
``scipy.stats.bootstrap`` because the verdict must be exactly mirrored when the two sides are
swapped: the resampling streams are assigned to the two samples in a canonical order that does
not depend on which one is called "head" (and does not change when all values are scaled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from perfgate.documents.verdict import Direction, MetricComparison, SideQuality, Verdict
from perfgate.errors import UsageError

BOOTSTRAP_RESAMPLES = 8000
"""Enough that the expanded tails (half a per cent at 5 repeats a side) hold 40 resamples."""
CONFIDENCE = 0.90
"""Two-sided level of the interval the verdict reads. Its lower end beyond the band is a
one-sided 5 % test of "worse than the threshold", and both ends inside the band is the
two-one-sided-tests (TOST) equivalence test at 5 %: the standard pairing for "is it a
regression" and "is it the same". A 95 % interval would make each of those a 2.5 % test and,
at the handful of repeats CI affords, cost a third of the power (2 % at 1 % noise with 5
repeats: 92 % detected instead of 99 %, benchmarks/gate_power.md) for false alarms that were
already near zero."""
ALPHA = 0.05
MAX_CV = 0.25
"""A side whose coefficient of variation exceeds this is too noisy to judge."""
MAX_THROTTLED_SHARE = 0.05
"""More than this share of GPU samples taken while throttled makes a side unsafe to judge."""


def compare_metric(
    metric: str,
    baseline: Sequence[float],
    head: Sequence[float],
    *,
    direction: Direction,
    threshold: float,
    baseline_throttled: float | None = None,
    head_throttled: float | None = None,
    seed: int = 0,
) -> MetricComparison:
    """Compare one metric before multiple-testing correction (``p_adjusted`` = raw p).

    Call :func:`correct` on all comparisons of a run to get the final verdicts.
    """
    base = _validated(metric, "baseline", baseline)
    new = _validated(metric, "head", head)
    if not 0 < threshold < 1:
        raise UsageError(f"threshold {threshold!r} for {metric} is not in (0, 1)", "use e.g. 0.05")
    worse, better = (new, base) if direction == "lower" else (base, new)
    ratio = math.exp(pairwise_log_ratio(worse, better))
    low, high = log_ratio_interval(worse, better, seed=seed)
    p_value = mann_whitney_p(base, new)
    quality = (
        side_quality(base, baseline_throttled),
        side_quality(new, head_throttled),
    )
    comparison = MetricComparison(
        metric=metric,
        direction=direction,
        baseline_median=_median(base),
        head_median=_median(new),
        ratio=ratio,
        ci_low=math.exp(low),
        ci_high=math.exp(high),
        p_value=p_value,
        threshold=threshold,
        min_detectable=_min_detectable(low, high, threshold, len(base), len(new)),
        baseline_repeats=len(base),
        head_repeats=len(new),
        verdict="inconclusive",
        quality=quality,
        baseline_values=tuple(sorted(float(v) for v in base)),
        head_values=tuple(sorted(float(v) for v in new)),
    )
    return decide(comparison, p_value)


def correct(
    comparisons: Sequence[MetricComparison], alpha: float = ALPHA
) -> list[MetricComparison]:
    """Benjamini–Hochberg over every comparison of the run, then the final verdicts."""
    from scipy import stats  # scipy.stats takes ~1 s to import: only when judging

    if not comparisons:
        return []
    adjusted = stats.false_discovery_control([c.p_value for c in comparisons], method="bh")
    return [decide(c, float(p), alpha) for c, p in zip(comparisons, adjusted, strict=True)]


def decide(
    comparison: MetricComparison, p_adjusted: float, alpha: float = ALPHA
) -> MetricComparison:
    """The verdict from the interval, the threshold and the corrected p-value.

    A throttled GPU or too few repeats always make it inconclusive: the first measured the
    wrong machine state, the second can never be significant. Noise and bimodality block only
    a verdict the interval does not carry on its own: an interval that clears the band despite
    them is a finding, but a "no change" from noisy or two-state samples is not trusted,
    because a bootstrap on a handful of heavy-tailed repeats can be narrower than the truth
    and a false "no change" hides a regression.
    """
    upper = 1 + comparison.threshold
    lower = 1 / upper
    blocking, noise = _quality_reasons(comparison)
    if math.isinf(comparison.min_detectable):
        blocking.append(
            f"too few repeats ({comparison.baseline_repeats} baseline, "
            f"{comparison.head_repeats} head) for the test ever to reach p < {ALPHA:g}"
        )
    significant = p_adjusted <= alpha
    reasons = list(blocking)
    if blocking:
        verdict: Verdict = "inconclusive"
    elif comparison.ci_low > upper and significant:
        verdict = "regression"
    elif comparison.ci_high < lower and significant:
        verdict = "improvement"
    elif noise:
        verdict = "inconclusive"
        reasons.extend(noise)
    elif comparison.ci_low >= lower and comparison.ci_high <= upper:
        verdict = "no_change"
    else:
        verdict = "inconclusive"
        if comparison.ci_low > upper or comparison.ci_high < lower:
            reasons.append(f"interval beyond the threshold but corrected p = {p_adjusted:.3g}")
        else:
            reasons.append(
                f"interval {comparison.ci_low:.3f}–{comparison.ci_high:.3f} straddles the "
                f"±{comparison.threshold:.0%} threshold"
            )
    return replace(comparison, verdict=verdict, reasons=tuple(reasons), p_adjusted=p_adjusted)


def pairwise_log_ratio(worse: np.ndarray, better: np.ndarray) -> float:
    """Median over all pairs of log(worse_i / better_j): the Hodges–Lehmann shift of the logs."""
    return float(np.median(np.subtract.outer(np.log(worse), np.log(better))))


def log_ratio_interval(
    worse: np.ndarray, better: np.ndarray, *, seed: int = 0, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Expanded percentile-bootstrap interval of the pairwise log ratio (see
    :func:`pairwise_log_ratio` and :func:`expanded_tail`).

    Resampling streams are assigned in a canonical order of the two samples, so swapping them
    gives exactly the mirrored interval, and scaling both leaves the indexes unchanged.
    """
    # Sorted: the resampled estimates then depend on each sample as a multiset, not its order.
    worse, better = np.sort(worse), np.sort(better)
    first, second = (worse, better) if _canonical_first(worse, better) else (better, worse)
    rng = np.random.default_rng(seed)
    first_logs = np.log(first)[_resample_indexes(len(first), rng)]
    second_logs = np.log(second)[_resample_indexes(len(second), rng)]
    pairs = first_logs[:, :, None] - second_logs[:, None, :]
    logs = np.median(pairs.reshape(BOOTSTRAP_RESAMPLES, -1), axis=1)
    if np.array_equal(worse, better):
        # Identical samples: no order can tell them apart, so use both orientations (they are
        # exchangeable) and the interval is symmetric around a ratio of 1.
        logs = np.concatenate([logs, -logs])
    elif first is not worse:
        logs = -logs
    # Order statistics rather than interpolated percentiles: exactly mirrored under negation.
    ordered = np.sort(logs)
    tail = expanded_tail(len(worse), len(better), confidence)
    k = int(tail * len(ordered))
    return float(ordered[k]), float(ordered[len(ordered) - 1 - k])


def expanded_tail(n_first: int, n_second: int, confidence: float = CONFIDENCE) -> float:
    """Tail probability of the *expanded* percentile interval for two samples of these sizes.

    A percentile bootstrap on a handful of values is too narrow twice over: each resample's
    spread is the plug-in (divide-by-n) one, and the normal shape ignores that the spread is
    itself estimated. Hesterberg's expansion picks the percentile whose normal quantile is
    Student's t times the plug-in correction: √f · t(df) with f = (1/(n₁−1) + 1/(n₂−1)) /
    (1/n₁ + 1/n₂) and df = 2·(min(n₁, n₂) − 1) — the pooled n₁ + n₂ − 2 for equal sizes, and
    for unequal ones a stand-in for Welch's df that, unlike Welch's, never falls when a side
    grows (so more repeats never make the gate see less). At 5 against 5 the 90 % interval
    takes the 1.9 % tails, at 20 against 20 about 4.2 %.
    """
    from scipy import stats  # scipy.stats takes ~1 s to import: only when judging

    if min(n_first, n_second) < 2:
        return 0.0
    plug_in = (1 / (n_first - 1) + 1 / (n_second - 1)) / (1 / n_first + 1 / n_second)
    df = 2 * (min(n_first, n_second) - 1)
    t = stats.t.ppf(1 - (1 - confidence) / 2, df)
    return float(stats.norm.cdf(-math.sqrt(plug_in) * t))


def _resample_indexes(size: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, size, (BOOTSTRAP_RESAMPLES, size))


def mann_whitney_p(baseline: np.ndarray, head: np.ndarray) -> float:
    """Two-sided Mann–Whitney U p-value (exact for small samples without ties)."""
    from scipy import stats  # scipy.stats takes ~1 s to import: only when judging

    if np.ptp(np.concatenate([baseline, head])) == 0:
        return 1.0
    return float(stats.mannwhitneyu(head, baseline, alternative="two-sided").pvalue)


def side_quality(values: np.ndarray, throttled_share: float | None) -> SideQuality:
    """Noise, bimodality and throttling of one side."""
    mean = float(np.mean(values))
    cv = float(np.std(values, ddof=1) / mean) if len(values) > 1 and mean > 0 else None
    return SideQuality(bimodal=is_bimodal(values), cv=cv, throttled_share=throttled_share)


def is_bimodal(values: np.ndarray) -> bool:
    """Two well-separated clusters: a gap between sorted values that splits them into groups of
    at least two (and a quarter of the sample) each, wider than 4× the larger group's spread
    and than 5 % of the median.

    With the handful of repeats a CI job affords, formal tests (Hartigan's dip) have no power;
    this rule catches the case that matters — two machine states, e.g. a fast and a slow
    clock or a cache that sometimes misses — without firing on ordinary noise.
    """
    ordered = np.sort(values)
    n = len(ordered)
    smallest = max(2, math.ceil(n / 4))
    if n < 2 * smallest:
        return False
    gaps = np.diff(ordered)
    median = float(np.median(ordered))
    for cut in range(smallest, n - smallest + 1):
        left, right = ordered[:cut], ordered[cut:]
        spread = max(float(np.ptp(left)), float(np.ptp(right)))
        gap = float(gaps[cut - 1])
        if gap > 4 * spread and gap > 0.05 * median:
            return True
    return False


def _quality_reasons(comparison: MetricComparison) -> tuple[list[str], list[str]]:
    """(reasons that always block a verdict, noise reasons that block an unclear one)."""
    blocking, noise = [], []
    for side, quality in zip(("baseline", "head"), comparison.quality, strict=True):
        if quality.bimodal:
            noise.append(f"{side} repeats are bimodal")
        if quality.cv is not None and quality.cv > MAX_CV:
            noise.append(f"{side} repeats too noisy (CV {quality.cv:.0%} > {MAX_CV:.0%})")
        if quality.throttled_share is not None and quality.throttled_share > MAX_THROTTLED_SHARE:
            blocking.append(
                f"{side} GPU throttled in {quality.throttled_share:.0%} of telemetry samples"
            )
    return blocking, noise


def _min_detectable(low: float, high: float, threshold: float, n_base: int, n_head: int) -> float:
    """Smallest relative worsening whose interval would clear the threshold: the threshold
    plus this comparison's half-width (on the log scale); inf when the exact Mann–Whitney test
    cannot reach ``ALPHA`` with these sample sizes however large the change."""
    smallest_p = 2 / math.comb(n_base + n_head, n_base)
    if smallest_p > ALPHA:
        return math.inf
    half_width = (high - low) / 2
    return (1 + threshold) * math.exp(half_width) - 1


def _canonical_first(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` takes the first resampling stream: an order of the two samples that
    ignores their names and their scale."""
    scale = float(np.median(np.concatenate([a, b])))
    key_a = (float(np.median(a)) / scale, len(a), tuple(np.sort(a) / scale))
    key_b = (float(np.median(b)) / scale, len(b), tuple(np.sort(b) / scale))
    return key_a <= key_b


def _validated(metric: str, side: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) == 0:
        raise UsageError(f"{metric}: the {side} has no repeat values", "run at least one repeat")
    if not np.all(np.isfinite(array)):
        raise UsageError(
            f"{metric}: the {side} holds NaN or infinite values", "re-run the workload"
        )
    if np.any(array <= 0):
        raise UsageError(f"{metric}: the {side} holds non-positive values", "check the metric")
    return array


def _median(values: np.ndarray) -> float:
    return float(np.median(values))
