"""The sequential A/B statistics: boundaries against published tables and Monte Carlo, the
repeated interval's error rates under optional stopping, and properties of the decision."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.errors import UsageError
from perfgate.stats.sequential import (
    _boundaries,
    sequential_comparison,
    sequential_design,
    sequential_state,
    trimmed_estimate,
)

# deadline=None: a per-example deadline is a timing assertion, and the CI machine is shared.
log_ratios = st.lists(
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), min_size=0, max_size=40
)


def test_boundaries_match_the_published_lan_demets_pocock_table() -> None:
    """Lan–DeMets Pocock-type spending, 5 equally spaced looks, two-sided α = 0.05:
    2.438, 2.427, 2.410, 2.397, 2.386 (as tabulated for the Lan–DeMets method, e.g. by the
    R packages ldbounds and gsDesign's sfLDPocock)."""
    fractions = np.arange(1, 6) / 5
    spent = 0.05 * np.log1p((math.e - 1) * fractions)
    bounds = _boundaries(fractions, np.diff(np.concatenate([[0.0], spent])))
    assert bounds == pytest.approx([2.438, 2.427, 2.410, 2.397, 2.386], abs=1.5e-3)


def test_boundaries_spend_alpha_exactly_on_brownian_paths() -> None:
    """Monte Carlo: standardised sums of normal rounds cross some look's boundary with
    probability α (0.10), looks at every round from 4 to 30."""
    design = sequential_design(30)
    rng = np.random.default_rng(7)
    sums = rng.standard_normal((100_000, 30)).cumsum(axis=1)
    statistic = np.abs(sums / np.sqrt(np.arange(1, 31)))[:, 3:]
    bounds = np.array([design.z_bound(n) for n in range(4, 31)])
    crossed = float((statistic >= bounds).any(axis=1).mean())
    assert crossed == pytest.approx(0.10, abs=0.005)


def test_design_is_cached_and_checks_its_inputs() -> None:
    assert sequential_design(20) is sequential_design(20)
    with pytest.raises(UsageError, match="fewer than the first look"):
        sequential_design(3)
    with pytest.raises(UsageError, match="alpha"):
        sequential_design(10, alpha=1.5)


def test_trimmed_estimate_is_the_mean_below_ten_rounds_and_resists_a_wild_round() -> None:
    values = [0.01, 0.02, 0.03, 0.0, 0.02]
    estimate, se, df = trimmed_estimate(values)
    assert estimate == pytest.approx(np.mean(values))
    assert se == pytest.approx(np.std(values, ddof=1) / math.sqrt(5))
    assert df == 4
    clean = [0.02 + 0.01 * math.sin(i) for i in range(20)]
    wild = [*clean[:-1], 3.0]  # one process that hit a multi-second stall
    assert trimmed_estimate(wild)[0] == pytest.approx(trimmed_estimate(clean)[0], abs=0.005)
    assert trimmed_estimate(wild)[2] == 20 - 2 * 2 - 1


def test_decisions_on_fixed_data() -> None:
    design = sequential_design(20)
    # +25 % with 2 % paired noise: a regression after a handful of rounds.
    slow = [math.log(1.25) + 0.02 * math.sin(i) for i in range(8)]
    state = sequential_state(slow, 0.05, design)
    assert state.verdict == "regression"
    assert math.exp(state.low) > 1.05
    # Identical code, 1 % noise: no change within the ±5 % band.
    same = [0.01 * math.sin(3 * i) for i in range(10)]
    assert sequential_state(same, 0.05, design).verdict == "no_change"
    # Too few rounds for a first look: continue, or inconclusive when no more will come.
    assert sequential_state(slow[:3], 0.05, design).verdict == "continue"
    final = sequential_state(slow[:3], 0.05, design, final=True)
    assert final.verdict == "inconclusive" and math.isinf(final.min_detectable)
    # A change sitting on the threshold with 10 % noise: undecided, and says what would decide.
    edge = [math.log(1.07) + 0.1 * math.sin(i) for i in range(12)]
    undecided = sequential_state(edge, 0.05, design, final=True)
    assert undecided.verdict == "inconclusive"
    assert undecided.rounds_needed is not None and undecided.rounds_needed > 12
    assert undecided.min_detectable > 0.05


@settings(deadline=None, max_examples=200)
@given(values=log_ratios, threshold=st.floats(min_value=0.01, max_value=0.5))
def test_swapping_the_sides_mirrors_the_decision(values: list[float], threshold: float) -> None:
    design = sequential_design(40)
    forward = sequential_state(values, threshold, design)
    backward = sequential_state([-v for v in values], threshold, design)
    mirror = {"regression": "improvement", "improvement": "regression"}
    assert backward.verdict == mirror.get(forward.verdict, forward.verdict)
    if math.isfinite(forward.low):
        assert backward.low == pytest.approx(-forward.high, abs=1e-12)
        assert backward.high == pytest.approx(-forward.low, abs=1e-12)


@settings(deadline=None, max_examples=200)
@given(values=log_ratios, threshold=st.floats(min_value=0.01, max_value=0.5))
def test_the_verdict_agrees_with_its_own_interval(values: list[float], threshold: float) -> None:
    state = sequential_state(values, threshold, sequential_design(40))
    band = math.log1p(threshold)
    assert state.low <= state.estimate <= state.high
    if state.verdict == "regression":
        assert state.low > band
    elif state.verdict == "improvement":
        assert state.high < -band
    elif state.verdict == "no_change":
        assert -band <= state.low and state.high <= band


@settings(deadline=None, max_examples=100)
@given(values=log_ratios, shift=st.floats(min_value=-0.5, max_value=0.5))
def test_a_uniform_shift_moves_the_interval_not_its_width(
    values: list[float], shift: float
) -> None:
    design = sequential_design(40)
    plain = sequential_state(values, 0.05, design)
    moved = sequential_state([v + shift for v in values], 0.05, design)
    if math.isfinite(plain.low):
        assert moved.high - moved.low == pytest.approx(plain.high - plain.low, abs=1e-9)
        assert moved.estimate == pytest.approx(plain.estimate + shift, abs=1e-9)


def test_bad_input_is_a_usage_error() -> None:
    design = sequential_design(10)
    with pytest.raises(UsageError, match="threshold"):
        sequential_state([0.1] * 5, 1.5, design)
    with pytest.raises(UsageError, match="not finite"):
        sequential_state([0.1, math.nan, 0.0, 0.1], 0.05, design)
    with pytest.raises(UsageError, match="not paired"):
        sequential_comparison(
            "step_time_s", [1.0] * 4, [1.0] * 5, direction="lower", threshold=0.05, design=design
        )
    with pytest.raises(UsageError, match="non-positive"):
        sequential_comparison(
            "step_time_s", [1.0, 0.0, 1, 1], [1.0] * 4, direction="lower", threshold=0.05,
            design=design,
        )  # fmt: skip


def _stopped(rng: np.random.Generator, effect: float, sigma: float, design_rounds: int) -> str:
    """One sequential A/B on simulated paired rounds, stopped at the first decision."""
    design = sequential_design(design_rounds)
    rounds = effect + rng.normal(0.0, sigma, design_rounds)
    wild = rng.random(design_rounds) < 0.02  # a round that hit a stall on one side
    rounds[wild] += np.log(rng.uniform(2, 10, wild.sum())) * rng.choice([-1, 1], wild.sum())
    for n in range(design.min_rounds, design_rounds + 1):
        state = sequential_state(rounds[:n], 0.05, design, final=n == design_rounds)
        if state.verdict != "continue":
            return state.verdict
    raise AssertionError("the horizon always ends the comparison")


@pytest.mark.slow
def test_error_rates_hold_under_optional_stopping() -> None:
    """Stopping at the first decision, on noise with wild rounds: identical code is (almost)
    never a regression or an improvement, a change exactly at the threshold is called a
    regression at most at the nominal 5 % (plus simulation error), and +25 % is caught."""
    rng = np.random.default_rng(2026)
    trials = 300
    aa = [_stopped(rng, 0.0, 0.05, 30) for _ in range(trials)]
    assert (aa.count("regression") + aa.count("improvement")) / trials <= 0.01
    edge = [_stopped(rng, math.log(1.05), 0.05, 30) for _ in range(trials)]
    assert edge.count("regression") / trials <= 0.05 + 0.035  # 3 binomial σ at n = 300
    slow = [_stopped(rng, math.log(1.25), 0.05, 30) for _ in range(trials)]
    assert slow.count("regression") / trials >= 0.99


def test_comparison_carries_the_interval_and_its_reasons() -> None:
    design = sequential_design(20)
    base = [0.010 * (1 + 0.01 * math.sin(i)) for i in range(8)]
    head = [v * 1.25 for v in base]
    comparison = sequential_comparison(
        "step_time_s", base, head, direction="lower", threshold=0.05, design=design
    )
    assert comparison.method == "sequential"
    assert comparison.verdict == "regression"
    assert comparison.ratio == pytest.approx(1.25)
    assert "decided after 8 of at most 20 rounds" in comparison.reasons[0]
    rates = sequential_comparison(
        "samples_per_s",
        [1 / v for v in base],
        [1 / v for v in head],
        direction="higher",
        threshold=0.05,
        design=design,
    )
    assert rates.verdict == "regression" and rates.ratio == pytest.approx(1.25)
    throttled = sequential_comparison(
        "step_time_s",
        base,
        head,
        direction="lower",
        threshold=0.05,
        design=design,
        head_throttled=0.3,
    )
    assert throttled.verdict == "inconclusive"
    assert "throttled" in throttled.reasons[0]
