"""The regression rules that ``gate_power.py`` runs side by side, as pure functions.

Each rule takes the per-repeat values of one metric (lower is better: step time), a baseline
and a head, and returns one outcome: ``"regression"`` (the gate would fail the pull request),
``"inconclusive"`` (perfgate only: it refuses to guess, which a CI job does not count as a
failure) or ``"pass"``. Every rule sees exactly the same samples, so differences between the rows
of the results table come from the rules alone.

The anchor rules are re-implemented from their projects' documented behaviour (read from their
source), not imported, so that the benchmark needs none of them installed:

- **asv** (``asv compare``/``asv continuous`` with the default ``--factor 1.1``): a regression
  when the head's median exceeds 1.1 × the baseline's median *and* ``asv.statistics.is_different``
  says the samples differ. That check is a two-sided Mann–Whitney U test at p < 0.002 (exact up
  to 20 values a side, normal approximation beyond), but only when the samples are large enough
  that the test *could* go below 0.002 by asv's own criterion ``1 / C(m + n, min(m, n)) < 0.002``.
  With fewer values (5 against 5: 1/252 = 0.004) asv falls back to a "pessimistic" check: the two
  99 % confidence intervals of the medians must not overlap, each interval being the
  distribution-free order-statistic interval, widened where the sample is too small for one (as
  at 5 values) to the 99 % credible interval of a Laplace-noise posterior for the location (and
  never narrower than the sample's range). Note the edge at 6 against 6: asv's criterion admits
  the test (1/924 < 0.002) but the smallest *two-sided* p is 2/924 = 0.0022, so the rule can then
  never fire.
- **pyperf** (``pyperf compare_to``): ``pyperf._utils.is_significant``, a Student two-sample
  (pooled-variance, *not* Welch) two-tailed t-test at the 95 % level, with critical values from
  pyperf's own table (exact t quantiles up to 30 degrees of freedom, then coarse steps: 2.042 up
  to 39, 2.021 from 40, 2.009 from 50, 2.000 from 60, 1.990 from 80, 1.984 from 100, 1.960 from
  200); it requires equal sample sizes. ``--min-speed`` defaults to 0, so there is no minimum
  change: any significant difference whose mean ratio is above 1 is reported "slower". Here it is
  given the per-repeat values; pyperf itself pools every value of every worker process (see
  :func:`pyperf_all_values`).
- **fixed 7 %** (TorchBench's regression threshold): a regression when the ratio of medians
  exceeds 1.07, with no test at all.
- **perfgate**: :func:`perfgate.stats.compare.compare_metric` then
  :func:`perfgate.stats.compare.correct`, exactly as ``perfgate compare`` calls them (bootstrap
  seed 0, the gate's default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from scipy import stats

from perfgate.stats.compare import compare_metric, correct

Outcome = Literal["regression", "inconclusive", "pass"]

ASV_P_THRESHOLD = 0.002
ASV_FACTOR = 1.1
ASV_CI_LEVEL = 0.99
ASV_EXACT_MAX = 20
"""asv computes the exact Mann–Whitney distribution up to this many values a side."""
PYPERF_LEVEL = 0.95
FIXED_THRESHOLD = 0.07
PERFGATE_SEED = 0
"""The bootstrap seed ``perfgate compare`` uses by default."""


@dataclass(frozen=True)
class Rule:
    """One row of the results table: a name, what it is, and the function that judges."""

    name: str
    description: str
    judge: Callable[[np.ndarray, np.ndarray], Outcome]


def perfgate_outcomes(
    base: np.ndarray, head: np.ndarray, thresholds: Sequence[float]
) -> list[Outcome]:
    """perfgate's verdict at each practical threshold, on one metric (BH over one p is that p).

    The bootstrap interval, the test and the quality checks do not depend on the threshold, so
    one :func:`compare_metric` call serves every threshold: the verdict at another threshold is
    :func:`correct` (hence ``decide``) on the same comparison with its threshold replaced —
    identical to a fresh call (``tests/test_gate_power.py`` checks it) at half the bootstrap cost.
    """
    first = compare_metric(
        "step_time_s",
        base.tolist(),
        head.tolist(),
        direction="lower",
        threshold=thresholds[0],
        seed=PERFGATE_SEED,
    )
    outcomes: list[Outcome] = []
    for threshold in thresholds:
        comparison = first if threshold == thresholds[0] else replace(first, threshold=threshold)
        (final,) = correct([comparison])
        if final.verdict == "regression":
            outcomes.append("regression")
        else:
            outcomes.append("inconclusive" if final.verdict == "inconclusive" else "pass")
    return outcomes


PERFGATE_DESCRIPTION = (
    "perfgate.stats.compare as it stands (see its module docstring for the effect estimate and "
    "its bootstrap interval): a regression only when the whole 95 % interval of the worse-is-"
    "greater ratio lies above 1 + threshold and the Benjamini–Hochberg-corrected Mann–Whitney "
    "p ≤ 0.05; inconclusive (interval straddling the threshold, bimodal or too noisy side, too "
    "few repeats for the test) counted as not a failure"
)


def asv_judge(base: np.ndarray, head: np.ndarray) -> Outcome:
    """asv: median ratio above 1.1 and ``is_different`` (see the module docstring)."""
    if not np.median(head) > ASV_FACTOR * np.median(base):
        return "pass"
    return "regression" if asv_is_different(base, head) else "pass"


def asv_is_different(a: np.ndarray, b: np.ndarray) -> bool:
    """asv's significance check: Mann–Whitney at p < 0.002 when it can reach it, else
    non-overlapping 99 % intervals of the medians."""
    m, n = len(a), len(b)
    if 1 / math.comb(m + n, min(m, n)) < ASV_P_THRESHOLD:
        exact = max(m, n) <= ASV_EXACT_MAX
        p = stats.mannwhitneyu(
            a,
            b,
            alternative="two-sided",
            method="exact" if exact else "asymptotic",
            use_continuity=False,
        ).pvalue
        return bool(p < ASV_P_THRESHOLD)
    low_a, high_a = asv_median_interval(a)
    low_b, high_b = asv_median_interval(b)
    return not (high_a >= low_b and low_a <= high_b)


def asv_median_interval(values: np.ndarray, level: float = ASV_CI_LEVEL) -> tuple[float, float]:
    """The interval asv stores as a result's ``ci_99``: order statistics (y_(r), y_(s)) whose
    binomial coverage of the median is at least ``level``; an end that no order statistic can
    give is taken from the Laplace-noise posterior of the location (widened to the sample's range).
    """
    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    tail = (1 - level) / 2
    cdf = stats.binom.cdf(np.arange(n), n, 0.5)  # P(K ≤ k), K ~ Bin(n, 1/2)
    lows = np.flatnonzero(cdf <= tail)
    highs = np.flatnonzero(cdf >= 1 - tail)
    low = float(ordered[lows[-1]]) if len(lows) else -math.inf
    high = float(ordered[highs[0]]) if len(highs) else math.inf
    if (math.isinf(low) or math.isinf(high)) and n > 1:
        if math.isinf(low):
            low = min(laplace_location_quantile(ordered, tail), float(ordered[0]))
        if math.isinf(high):
            high = max(laplace_location_quantile(ordered, 1 - tail), float(ordered[-1]))
    return low, high


def laplace_location_quantile(values: np.ndarray, q: float) -> float:
    """Quantile ``q`` of the posterior of a location β under Laplace noise of unknown scale
    (scale prior 1/σ): density ∝ (Σ|y_j − β|)^(−n).

    Σ|y_j − β| is linear between consecutive sorted values, so the density integrates in
    closed form segment by segment and the quantile is solved on the segment that holds it.
    Values are centred and scaled first so the powers neither overflow nor underflow.
    """
    y = np.sort(np.asarray(values, dtype=float))
    n = len(y)
    centre = float(np.median(y))
    scale = float(np.sum(np.abs(y - centre)))
    if scale == 0:
        return centre
    z = (y - centre) / scale
    power = 1 - n  # the antiderivative of (cβ + d)^(−n) is (cβ + d)^(1 − n) / (c (1 − n))
    edges = [-math.inf, *z.tolist(), math.inf]
    segments = []
    for k in range(n + 1):  # segment k: k values lie below β
        slope = 2 * k - n
        offset = float(np.sum(z[k:]) - np.sum(z[:k]))
        segments.append((edges[k], edges[k + 1], slope, offset))

    def antiderivative(beta: float, slope: int, offset: float) -> float:
        if math.isinf(beta):
            return 0.0  # (cβ + d)^(1 − n) vanishes at ±inf for n ≥ 2
        return (slope * beta + offset) ** power / (slope * power)

    def mass(low: float, high: float, slope: int, offset: float) -> float:
        if slope == 0:
            return (high - low) * offset ** (-n)
        return antiderivative(high, slope, offset) - antiderivative(low, slope, offset)

    masses = [mass(*segment) for segment in segments]
    target = q * sum(masses)
    for (low, high, slope, offset), segment_mass in zip(segments, masses, strict=True):
        if target > segment_mass:
            target -= segment_mass
            continue
        if slope == 0:
            beta = low + target * offset**n
        else:
            start = 0.0 if math.isinf(low) else (slope * low + offset) ** power
            level = start + target * slope * power
            beta = (level ** (1 / power) - offset) / slope
        return centre + min(beta, high) * scale
    return centre + float(z[-1]) * scale


def pyperf_critical_value(df: int) -> float:
    """pyperf's two-tailed 95 % critical t value for ``df`` degrees of freedom (its table:
    exact to 30, then coarse steps that use the value at the step's lower end)."""
    quantile = 1 - (1 - PYPERF_LEVEL) / 2
    if df >= 200:
        return 1.960
    for lower in (100, 80, 60, 50, 40):
        if df >= lower:
            return round(float(stats.t.ppf(quantile, lower)), 3)
    return round(float(stats.t.ppf(quantile, min(df, 30))), 3)


def pyperf_judge(base: np.ndarray, head: np.ndarray) -> Outcome:
    """pyperf ``compare_to``: Student's pooled t-test significant and the mean ratio above 1."""
    if len(base) != len(head):
        raise ValueError("pyperf's t-test needs the same number of values on both sides")
    n = len(base)
    df = 2 * n - 2
    pooled = (np.sum((base - base.mean()) ** 2) + np.sum((head - head.mean()) ** 2)) / df
    if pooled == 0:
        return "pass"
    t_score = (head.mean() - base.mean()) / math.sqrt(2 * pooled / n)
    significant = abs(t_score) >= pyperf_critical_value(df)
    return "regression" if significant and head.mean() > base.mean() else "pass"


def fixed_judge(base: np.ndarray, head: np.ndarray) -> Outcome:
    """TorchBench-style fixed threshold: the median ratio above 1.07, no test."""
    return "regression" if np.median(head) > (1 + FIXED_THRESHOLD) * np.median(base) else "pass"


ASV = Rule(
    "asv (MWU p<0.002, ×1.1)",
    "median ratio > 1.1 and Mann–Whitney p < 0.002 (or, when the samples are too small for "
    "that, non-overlapping 99 % median intervals)",
    asv_judge,
)
PYPERF = Rule(
    "pyperf (Student t, 95 %)",
    "pooled-variance two-tailed t-test at 95 % on the means, mean ratio > 1, no minimum change",
    pyperf_judge,
)
FIXED = Rule("fixed 7 % (TorchBench)", "median ratio > 1.07, no test", fixed_judge)


def pyperf_all_values(base_steps: np.ndarray, head_steps: np.ndarray) -> Outcome:
    """pyperf as it is used: every value of every worker process pooled into one sample.

    ``*_steps`` are (repeats, steps) arrays; pooling treats steps of one process as independent
    draws, which they are not when processes differ (between-process noise), so the t-test's
    standard error is too small.
    """
    return pyperf_judge(base_steps.ravel(), head_steps.ravel())
