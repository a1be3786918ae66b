"""Sequential decisions for interleaved A/B: repeated confidence intervals with alpha spending.

An interleaved A/B measures base and head in rounds (one fresh process each per round) and
should stop as soon as the evidence decides. Looking at a fixed-size test after every round and
stopping when it first says "significant" is the classic way to turn a 5 % test into a 20–30 %
one (optional stopping). This module keeps the error rates under any stopping rule with
**repeated confidence intervals** (Jennison & Turnbull, "Repeated confidence intervals for group
sequential clinical trials", Controlled Clinical Trials 5, 1984; their book *Group Sequential
Methods with Applications to Clinical Trials*, 2000, ch. 9): intervals I_n, one per look n, whose
*simultaneous* coverage over every look up to the horizon is at least 1 − α. Whatever rule
decides when to stop — the first interval that clears the threshold, a time budget, the horizon —
the interval read at that moment covers the true effect with probability ≥ 1 − α.

Method (pure functions: numbers in, a frozen state out):

- **Unit**: the round. Round i yields d_i = log(head_i / base_i) of the two repeats measured back
  to back (paired: whatever the machine did during the round lands on both), one value per
  round, with the order rotated every round so a linear drift cancels over pairs of rounds.
- **Estimate**: the 10 %-trimmed mean of the d_i with its Tukey–McLaughlin standard error
  (winsorised variance; Yuen's trimmed-mean t, df = n − 2g − 1): one process that hit a stall
  cannot move it, and it is the plain mean (Student's t) below 10 rounds.
- **Boundaries**: a Lan & DeMets alpha-spending function (Biometrika 70, 1983) from Kim &
  DeMets' power family (Biometrics 43, 1987), α(t) = α · t², with one look per round from
  ``min_rounds`` to the horizon ``max_rounds`` at information t = n / max_rounds. The two-sided
  normal boundaries z_n solve P(|Z_j| < z_j for j < n, |Z_n| ≥ z_n) = α(t_n) − α(t_{n−1}) by
  recursive numerical integration of the Brownian-motion score (Armitage, McPherson & Rowe
  1969). The exponent 2 sits between Pocock's shape (≈ 1: early stops, but at 80 looks a
  final interval 39 % wider than a fixed test's) and O'Brien–Fleming's (≈ 3: hardly any early
  stop); at 80 looks its final interval is 19 % wider than a fixed test's. Simulated on
  this project's CPU noise (paired σ 11 %, 2 % wild rounds, 80 rounds at most) it caught +10 %
  against a 5 % threshold in 96 % of A/B runs where Pocock's caught 92 %, at the price of a
  median 11 rounds instead of 7 for +25 % (``benchmarks/sequential_ab.md`` has the tables).
- **Small samples**: each z_n is turned into a Student-t critical value with the same nominal
  tail (Jennison & Turnbull's significance-level approach, §3.8 and §9.3), so a 4-round interval
  uses t on 3 degrees of freedom, not the normal.
- **Decision at each look**, with the practical threshold band B = [−log(1 + t), log(1 + t)]:
  *regression* when the interval lies above B, *improvement* when below, *no change* when inside
  it, otherwise continue. A decision is thus a one-sided 5 % test against the band (or, for no
  change, the two one-sided tests) at α = 10 %, the same reading as the fixed-size gate's 90 %
  interval, but valid at whatever round it happens. At the horizon (or when the time budget
  ends the measuring) an undecided interval is *inconclusive*, with the smallest change the
  measured noise lets the rounds done detect and roughly how many rounds would decide.
- **Several workloads**: the caller divides α among the workloads (Bonferroni), which keeps the
  family's error rate under optional stopping without assumptions about how they correlate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy import optimize, stats

from perfgate.documents.verdict import Direction, MetricComparison, SideQuality, Verdict
from perfgate.errors import UsageError
from perfgate.stats.compare import MAX_THROTTLED_SHARE, side_quality

SequentialVerdict = Literal["regression", "improvement", "no_change", "continue", "inconclusive"]

SPENDING_POWER = 2.0
"""ρ of the spending function α·t^ρ (see the module docstring)."""
DEFAULT_ALPHA = 0.10
"""Two-sided level of the repeated intervals: 5 % in each tail, like the fixed gate's 90 %."""
MIN_ROUNDS = 4
"""The first look: an interval from fewer paired rounds has too few degrees of freedom to mean
anything (3 rounds leave 2)."""
TRIM = 0.10
"""Share trimmed from each end of the round values (10 %: one round in ten may be wild)."""
POWER = 0.95
"""Power at which the smallest detectable change is quoted."""
MAX_ROUNDS_QUOTED = 10_000
"""Above this, "rounds that would decide" is reported as unreachable."""

_GRID_POINTS = 401
"""Points of the continuation region's grid in the recursive integration: the boundaries of
Lan–DeMets' Pocock-type spending agree with the published ones to the third decimal (tests)."""


@dataclass(frozen=True, kw_only=True)
class SequentialDesign:
    """The boundaries of one sequential comparison: a look per round up to the horizon."""

    max_rounds: int
    min_rounds: int
    alpha: float
    z_bounds: tuple[float, ...]
    """Two-sided normal boundary at look n = ``min_rounds + index``."""

    def z_bound(self, rounds: int) -> float:
        """The normal boundary at ``rounds`` (clamped into the design's looks)."""
        index = min(max(rounds, self.min_rounds), self.max_rounds) - self.min_rounds
        return self.z_bounds[index]

    def critical(self, rounds: int, df: int) -> float:
        """The Student-t critical value with the same nominal tail as the normal boundary."""
        tail = float(stats.norm.sf(self.z_bound(rounds)))
        return float(stats.t.isf(tail, df)) if df >= 1 else math.inf


@dataclass(frozen=True, kw_only=True)
class SequentialState:
    """Where a sequential comparison stands after ``rounds`` rounds."""

    rounds: int
    estimate: float
    """Trimmed mean of the per-round log ratios (> 0: head worse)."""
    low: float
    high: float
    """The repeated confidence interval of the log ratio at this look."""
    standard_error: float
    critical: float
    """How many standard errors the interval reaches at this look (t-corrected boundary)."""
    verdict: SequentialVerdict
    min_detectable: float
    """Smallest relative worsening (0.12 = 12 %) these rounds would flag with 95 % power at the
    measured noise; inf before the first look."""
    rounds_needed: int | None
    """Roughly how many rounds would decide at the measured noise and effect (None: the effect
    sits on the threshold, or more than ``MAX_ROUNDS_QUOTED`` would be needed)."""


def sequential_design(
    max_rounds: int, *, min_rounds: int = MIN_ROUNDS, alpha: float = DEFAULT_ALPHA
) -> SequentialDesign:
    """Power-family alpha-spending boundaries for one look per round (cached: pure, and
    about 0.3 s for 80 looks, 0.9 s for 200)."""
    if not 0 < alpha < 1:
        raise UsageError(f"alpha {alpha!r} is not in (0, 1)", "use e.g. 0.10")
    if min_rounds < 2:
        raise UsageError(f"min_rounds {min_rounds} is below 2", "use at least 2 rounds")
    if max_rounds < min_rounds:
        raise UsageError(
            f"at most {max_rounds} rounds is fewer than the first look at {min_rounds}",
            f"allow at least {min_rounds} rounds",
        )
    return _design(int(max_rounds), int(min_rounds), float(alpha))


@lru_cache(maxsize=256)
def _design(max_rounds: int, min_rounds: int, alpha: float) -> SequentialDesign:
    looks = np.arange(min_rounds, max_rounds + 1, dtype=float)
    fractions = looks / max_rounds
    spent = alpha * fractions**SPENDING_POWER
    increments = np.diff(np.concatenate([[0.0], spent]))
    return SequentialDesign(
        max_rounds=max_rounds,
        min_rounds=min_rounds,
        alpha=alpha,
        z_bounds=tuple(_boundaries(fractions, increments)),
    )


def _boundaries(fractions: np.ndarray, increments: np.ndarray) -> list[float]:
    """Two-sided boundaries z_k on the standardised statistic B(t_k)/√t_k of a Brownian motion,
    each spending ``increments[k]`` of the error: the grid holds the sub-density of B(t_k) over
    the continuation region (paths not stopped yet), carried from look to look by the Gaussian
    transition of the time in between."""
    bounds: list[float] = []
    grid = mass = np.zeros(0)
    previous = 0.0
    for fraction, spend in zip(fractions, increments, strict=True):
        step = float(fraction - previous)
        z = _boundary(grid, mass, float(fraction), step, float(spend))
        bounds.append(z)
        edge = min(z, 40.0) * math.sqrt(fraction)
        new_grid = np.linspace(-edge, edge, _GRID_POINTS)
        if grid.size == 0:
            density = stats.norm.pdf(new_grid, scale=math.sqrt(fraction))
        else:
            scale = math.sqrt(step)
            kernel = stats.norm.pdf((new_grid[:, None] - grid[None, :]) / scale) / scale
            density = kernel @ mass
        grid, mass = new_grid, density * _simpson_weights(new_grid)
        previous = float(fraction)
    return bounds


def _boundary(
    grid: np.ndarray, mass: np.ndarray, fraction: float, step: float, spend: float
) -> float:
    """The boundary at one look that the paths still running cross with probability
    ``spend`` (``mass``: their probability weights on ``grid`` at the previous look; empty at
    the first look, where every path starts at 0)."""
    if spend <= 0:
        return math.inf

    def crossing(z: float) -> float:
        if grid.size == 0:
            return float(2 * stats.norm.sf(z))
        edge = z * math.sqrt(fraction)
        scale = math.sqrt(step)
        outside = stats.norm.sf((edge - grid) / scale) + stats.norm.cdf((-edge - grid) / scale)
        return float(np.dot(mass, outside))

    return float(optimize.brentq(lambda z: crossing(z) - spend, 0.0, 40.0, xtol=1e-10))


def _simpson_weights(grid: np.ndarray) -> np.ndarray:
    """Composite Simpson weights on an odd number of equally spaced points."""
    h = (grid[-1] - grid[0]) / (len(grid) - 1)
    weights = np.ones(len(grid))
    weights[1:-1:2] = 4
    weights[2:-1:2] = 2
    return weights * h / 3


def trimmed_estimate(values: Sequence[float], trim: float = TRIM) -> tuple[float, float, int]:
    """(trimmed mean, its standard error, degrees of freedom) of ``values``.

    Tukey–McLaughlin: the standard error is the winsorised standard deviation over
    (1 − 2γ)·√n, with n − 2g − 1 degrees of freedom (g = ⌊γ n⌋ values trimmed from each end);
    with g = 0 it is the mean and Student's standard error.
    """
    array = np.sort(np.asarray(values, dtype=float))
    n = len(array)
    if n < 2:
        raise UsageError(f"a sequential estimate needs at least 2 rounds, got {n}", "run more")
    g = math.floor(trim * n)
    kept = array[g : n - g]
    winsorised = np.concatenate([np.full(g, kept[0]), kept, np.full(g, kept[-1])])
    sd = float(np.std(winsorised, ddof=1))
    se = sd / ((1 - 2 * g / n) * math.sqrt(n))
    return float(np.mean(kept)), se, n - 2 * g - 1


def sequential_state(
    log_ratios: Sequence[float] | np.ndarray,
    threshold: float,
    design: SequentialDesign,
    *,
    final: bool = False,
) -> SequentialState:
    """The repeated interval and the decision after ``len(log_ratios)`` rounds.

    ``final``: no more rounds will be measured (horizon or budget reached), so an undecided
    interval is *inconclusive* rather than *continue*.
    """
    if not 0 < threshold < 1:
        raise UsageError(f"threshold {threshold!r} is not in (0, 1)", "use e.g. 0.05")
    values = np.asarray(log_ratios, dtype=float)
    if not np.all(np.isfinite(values)):
        raise UsageError("a round's log ratio is not finite", "re-run the A/B")
    rounds = len(values)
    band = math.log1p(threshold)
    if rounds < max(design.min_rounds, 2):
        estimate = float(np.mean(values)) if rounds else 0.0
        return SequentialState(
            rounds=rounds,
            estimate=estimate,
            low=-math.inf,
            high=math.inf,
            standard_error=math.inf,
            critical=math.inf,
            verdict="inconclusive" if final else "continue",
            min_detectable=math.inf,
            rounds_needed=None,
        )
    estimate, se, df = trimmed_estimate(values.tolist())
    critical = design.critical(rounds, df)
    low, high = estimate - critical * se, estimate + critical * se
    verdict: SequentialVerdict
    if low > band:
        verdict = "regression"
    elif high < -band:
        verdict = "improvement"
    elif low >= -band and high <= band:
        verdict = "no_change"
    else:
        verdict = "inconclusive" if final or rounds >= design.max_rounds else "continue"
    power = float(stats.t.ppf(POWER, df)) if df >= 1 else math.inf
    return SequentialState(
        rounds=rounds,
        estimate=estimate,
        low=low,
        high=high,
        standard_error=se,
        critical=critical,
        verdict=verdict,
        min_detectable=math.expm1(band + (critical + power) * se),
        rounds_needed=_rounds_needed(estimate, se * math.sqrt(rounds), band, design),
    )


def narrowest_band(sigma: float, design: SequentialDesign) -> float:
    """The narrowest threshold inside which identical code lands (*no change*) with ~95 %
    probability by the horizon, for between-process noise ``sigma`` (the log-scale standard
    deviation of one repeat, as ``perfgate calibrate`` measures it): the paired round's noise is
    √2 · sigma, and the final interval must fit inside the band,
    ``exp((critical + z₀.₉₇₅) · √2 · sigma / √max_rounds) − 1``. A tighter threshold turns
    A/A comparisons into inconclusive ones; a looser one lets real changes through.
    """
    if not (math.isfinite(sigma) and sigma >= 0):
        raise UsageError(f"noise {sigma!r} is not a finite, non-negative number", "re-calibrate")
    rounds = design.max_rounds
    g = math.floor(TRIM * rounds)
    critical = design.critical(rounds, rounds - 2 * g - 1)
    se = math.sqrt(2) * sigma / ((1 - 2 * g / rounds) * math.sqrt(rounds))
    return math.expm1((critical + float(stats.norm.ppf(0.975))) * se)


def _rounds_needed(estimate: float, sd: float, band: float, design: SequentialDesign) -> int | None:
    """Rounds at which an interval around ``estimate`` with per-round spread ``sd`` would clear
    the nearest edge of the band, at the design's final boundary (normal approximation)."""
    distance = min(abs(estimate - band), abs(estimate + band))
    if distance <= 0:
        return None
    if sd <= 0:
        return design.min_rounds
    z = design.z_bounds[-1]
    needed = math.ceil((z * sd / distance) ** 2)
    if needed > MAX_ROUNDS_QUOTED:
        return None
    return max(needed, design.min_rounds)


def sequential_comparison(
    metric: str,
    baseline: Sequence[float],
    head: Sequence[float],
    *,
    direction: Direction,
    threshold: float,
    design: SequentialDesign,
    final: bool = True,
    baseline_throttled: float | None = None,
    head_throttled: float | None = None,
) -> MetricComparison:
    """One metric of an interleaved A/B as a :class:`MetricComparison`: ``baseline[i]`` and
    ``head[i]`` are the two repeats of round ``i``.

    A side measured on a throttled GPU makes it inconclusive whatever the interval (it
    measured the machine's state, not the code). ``p_value`` is the fixed-sample t-test of
    "no difference", for reference only: the decision is the interval's.
    """
    base = _paired(metric, "baseline", baseline)
    new = _paired(metric, "head", head)
    if len(base) != len(new):
        raise UsageError(
            f"{metric}: {len(base)} baseline and {len(new)} head rounds are not paired",
            "judge the rounds both sides completed",
        )
    worse_logs = np.log(new) - np.log(base)
    if direction == "higher":
        worse_logs = -worse_logs
    state = sequential_state(worse_logs, threshold, design, final=final)
    quality = (side_quality(base, baseline_throttled), side_quality(new, head_throttled))
    verdict, reasons = _sequential_verdict(state, threshold, design, quality)
    p_value = (
        float(stats.ttest_1samp(worse_logs, 0.0).pvalue)
        if len(worse_logs) >= 2 and np.ptp(worse_logs) > 0
        else 1.0
    )
    return MetricComparison(
        metric=metric,
        direction=direction,
        baseline_median=float(np.median(base)),
        head_median=float(np.median(new)),
        ratio=math.exp(state.estimate),
        ci_low=math.exp(state.low),
        ci_high=math.exp(state.high),
        p_value=p_value,
        threshold=threshold,
        min_detectable=state.min_detectable,
        baseline_repeats=len(base),
        head_repeats=len(new),
        verdict=verdict,
        reasons=reasons,
        quality=quality,
        baseline_values=tuple(sorted(float(v) for v in base)),
        head_values=tuple(sorted(float(v) for v in new)),
        method="sequential",
        rounds_needed=state.rounds_needed,
    )


def _sequential_verdict(
    state: SequentialState,
    threshold: float,
    design: SequentialDesign,
    quality: tuple[SideQuality, SideQuality],
) -> tuple[Verdict, tuple[str, ...]]:
    throttled = [
        f"{side} GPU throttled in {q.throttled_share:.0%} of telemetry samples"
        for side, q in zip(("baseline", "head"), quality, strict=True)
        if q.throttled_share is not None and q.throttled_share > MAX_THROTTLED_SHARE
    ]
    if throttled:
        return "inconclusive", tuple(throttled)
    if state.verdict in ("regression", "improvement", "no_change"):
        return state.verdict, (
            f"decided after {state.rounds} of at most {design.max_rounds} rounds",
        )
    if state.rounds < design.min_rounds:
        return "inconclusive", (
            f"only {state.rounds} rounds: the first look is after {design.min_rounds}",
        )
    needed = (
        f"about {state.rounds_needed} rounds would decide at the measured noise"
        if state.rounds_needed is not None
        else "the change sits on the threshold: no affordable number of rounds would decide"
    )
    return "inconclusive", (
        f"after {state.rounds} of at most {design.max_rounds} rounds the interval "
        f"{math.exp(state.low):.3f}–{math.exp(state.high):.3f} straddles the "
        f"±{threshold:.0%} threshold; {needed}",
    )


def _paired(metric: str, side: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise UsageError(
            f"{metric}: the {side} rounds hold missing, infinite or non-positive values",
            "re-run the A/B",
        )
    return array
