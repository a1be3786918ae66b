"""The per-metric decision: fixed-data cases and properties (symmetry, scale, determinism)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.errors import UsageError
from perfgate.stats.compare import compare_metric, correct, is_bimodal

MIRROR = {"regression": "improvement", "improvement": "regression"}


def noisy(level: float, n: int, seed: int, cv: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in level * (1 + cv * rng.standard_normal(n))]


def step_time(baseline: list[float], head: list[float], **kwargs: object) -> str:
    comparison = compare_metric(
        "step_time_s",
        baseline,
        head,
        direction="lower",
        threshold=0.05,
        **kwargs,  # type: ignore[arg-type]
    )
    return comparison.verdict


def test_clear_regression_improvement_and_no_change() -> None:
    base = noisy(1.0, 6, 0)
    assert step_time(base, noisy(1.15, 6, 1)) == "regression"
    assert step_time(base, noisy(0.85, 6, 2)) == "improvement"
    assert step_time(base, noisy(1.0, 6, 3)) == "no_change"


def test_higher_is_better_metrics_flip_the_direction() -> None:
    base = noisy(1000.0, 6, 4)
    lower_throughput = compare_metric(
        "samples_per_s", base, noisy(850.0, 6, 5), direction="higher", threshold=0.05
    )
    assert lower_throughput.verdict == "regression"
    assert lower_throughput.ratio == pytest.approx(1000 / 850, rel=0.03)


def test_a_change_inside_the_threshold_is_no_change_even_if_significant() -> None:
    comparison = compare_metric(
        "step_time_s",
        noisy(1.0, 8, 6, 0.002),
        noisy(1.02, 8, 7, 0.002),
        direction="lower",
        threshold=0.05,
    )
    assert comparison.p_value < 0.01
    assert comparison.verdict == "no_change"


def test_straddling_the_threshold_is_inconclusive_with_the_detectable_change() -> None:
    comparison = compare_metric(
        "step_time_s",
        [1.0, 0.95, 1.05, 0.98, 1.02],
        [1.06, 1.01, 1.12, 1.03, 1.09],
        direction="lower",
        threshold=0.05,
    )
    assert comparison.verdict == "inconclusive"
    assert any("straddles" in r or "corrected p" in r for r in comparison.reasons)
    assert comparison.min_detectable > comparison.threshold


def test_three_repeats_a_side_can_never_be_significant() -> None:
    comparison = compare_metric(
        "step_time_s", [1.0, 1.01, 0.99], [2.0, 2.01, 1.99], direction="lower", threshold=0.05
    )
    assert comparison.verdict == "inconclusive"
    assert math.isinf(comparison.min_detectable)
    assert "too few repeats (3 baseline, 3 head)" in comparison.reasons[0]


def test_bimodal_and_throttled_sides_are_unsafe() -> None:
    bimodal = [1.0, 1.001, 0.999, 1.3, 1.301, 1.299]
    assert is_bimodal(np.array(bimodal))
    assert not is_bimodal(np.array(noisy(1.0, 12, 10, 0.05)))
    assert step_time(noisy(1.0, 6, 11), bimodal) == "inconclusive"
    throttled = compare_metric(
        "step_time_s",
        noisy(1.0, 6, 12),
        noisy(1.2, 6, 13),
        direction="lower",
        threshold=0.05,
        head_throttled=0.3,
    )
    assert throttled.verdict == "inconclusive"
    assert "head GPU throttled in 30% of telemetry samples" in throttled.reasons


def test_correction_across_many_comparisons() -> None:
    comparisons = [
        compare_metric(
            f"m{i}",
            noisy(1.0, 6, 100 + i),
            noisy(1.0, 6, 200 + i),
            direction="lower",
            threshold=0.05,
        )
        for i in range(19)
    ]
    comparisons.append(
        compare_metric(
            "slow", noisy(1.0, 6, 300), noisy(1.2, 6, 301), direction="lower", threshold=0.05
        )
    )
    corrected = correct(comparisons)
    assert [c.verdict for c in corrected].count("regression") == 1
    assert corrected[-1].verdict == "regression"
    assert all(c.p_adjusted is not None and c.p_adjusted >= c.p_value for c in corrected)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0.0])
def test_invalid_values_are_rejected(bad: float) -> None:
    with pytest.raises(UsageError, match="step_time_s"):
        step_time([1.0, 1.0, bad], [1.0, 1.0, 1.0])


def test_empty_side_is_rejected() -> None:
    with pytest.raises(UsageError, match="no repeat values"):
        step_time([], [1.0])


samples = st.lists(st.floats(min_value=0.5, max_value=2.0), min_size=1, max_size=9)


@settings(max_examples=60, deadline=None)
@given(samples, samples)
@pytest.mark.slow
def test_swapping_sides_mirrors_the_verdict(base: list[float], head: list[float]) -> None:
    forward = compare_metric("m", base, head, direction="lower", threshold=0.05)
    backward = compare_metric("m", head, base, direction="lower", threshold=0.05)
    assert backward.verdict == MIRROR.get(forward.verdict, forward.verdict)
    assert backward.ratio == pytest.approx(1 / forward.ratio)
    assert backward.ci_low == pytest.approx(1 / forward.ci_high)
    assert backward.p_value == pytest.approx(forward.p_value)


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.sampled_from([1e-3, 0.5, 7.0, 1e4]))
@pytest.mark.slow
def test_scaling_every_sample_changes_nothing(
    base: list[float], head: list[float], c: float
) -> None:
    plain = compare_metric("m", base, head, direction="lower", threshold=0.05)
    scaled = compare_metric(
        "m", [v * c for v in base], [v * c for v in head], direction="lower", threshold=0.05
    )
    assert scaled.verdict == plain.verdict
    assert scaled.ratio == pytest.approx(plain.ratio)
    assert scaled.ci_low == pytest.approx(plain.ci_low)


@settings(max_examples=30, deadline=None)
@given(samples, samples)
def test_deterministic(base: list[float], head: list[float]) -> None:
    first = compare_metric("m", base, head, direction="higher", threshold=0.03)
    second = compare_metric("m", base, head, direction="higher", threshold=0.03)
    assert first == second


@given(st.floats(min_value=0.1, max_value=10), st.integers(1, 6), st.integers(1, 6))
def test_constant_and_tiny_samples_do_not_raise(level: float, n: int, m: int) -> None:
    comparison = compare_metric("m", [level] * n, [level] * m, direction="lower", threshold=0.05)
    assert comparison.ratio == pytest.approx(1.0)
    assert comparison.verdict in {"no_change", "inconclusive"}


def simulated(
    level: float, n: int, rng: np.random.Generator, cv: float, stall: float
) -> list[float]:
    """Repeat medians with Gaussian noise and rare 5x stalls (this CPU's worst behaviour)."""
    values = level * (1 + cv * rng.standard_normal(n))
    values[rng.random(n) < stall] *= 5
    return [float(v) for v in np.abs(values)]


@pytest.mark.parametrize(("cv", "stall"), [(0.01, 0.0), (0.10, 0.02)])
@pytest.mark.slow
def test_false_alarms_on_aa_pairs_stay_under_one_percent(cv: float, stall: float) -> None:
    rng = np.random.default_rng(42)
    verdicts = [
        step_time(simulated(1.0, 5, rng, cv, stall), simulated(1.0, 5, rng, cv, stall))
        for _ in range(300)
    ]
    assert verdicts.count("regression") + verdicts.count("improvement") <= 3


@pytest.mark.slow
def test_a_large_slowdown_on_a_quiet_machine_is_caught() -> None:
    rng = np.random.default_rng(7)
    verdicts = [
        step_time(simulated(1.0, 5, rng, 0.01, 0.0), simulated(1.25, 5, rng, 0.01, 0.0))
        for _ in range(200)
    ]
    assert verdicts.count("regression") >= 190
