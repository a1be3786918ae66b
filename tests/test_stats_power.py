"""The analytic power model: formulas on fixed numbers, properties, and a Monte-Carlo check
against the real compare rule (the model must predict what ``compare_metric`` does)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.errors import UsageError
from perfgate.stats.compare import compare_metric, correct
from perfgate.stats.power import (
    log_ratio_se,
    min_detectable,
    minimum_repeats,
    noise_sigma,
    recommended_threshold,
    repeats_needed,
    repeats_needed_tuned,
    smallest_p,
)

# deadline=None throughout: Hypothesis' per-example deadline is a timing assertion, and a loaded
# 2-core CI machine must not fail a test of pure arithmetic.
sigmas = st.floats(min_value=0.0, max_value=0.5, allow_nan=False)
repeats = st.integers(min_value=1, max_value=60)
thresholds = st.floats(min_value=0.001, max_value=0.5)
positive = st.floats(min_value=1e-3, max_value=1e3)


def never(value: int | None) -> float:
    """None ("not within the limit") orders after every repeat count."""
    return math.inf if value is None else value


def test_formulas_on_fixed_numbers() -> None:
    assert log_ratio_se(0.1, 4, 4) == pytest.approx(math.sqrt(math.pi / 3) * 0.1 * math.sqrt(0.5))
    # 8 a side, 3 % noise: the expanded interval reaches √(8/7)·t(0.975, 7) = 2.52787 standard
    # errors; t(0.95, 14) = 1.76131 for the power.
    se = math.sqrt(math.pi / 3) * 0.03 * 0.5
    expected = math.exp(math.log(1.05) + (1.882920 + 1.761310) * se) - 1
    assert min_detectable(0.03, 8, 8, 0.05) == pytest.approx(expected, rel=1e-5)
    recommended = math.exp((1.882920 + 1.959964) * se) - 1
    assert recommended_threshold(0.03, 8, 8) == pytest.approx(recommended, rel=1e-5)
    assert noise_sigma([1.0, math.e]) == pytest.approx(math.sqrt(0.5))


def test_mann_whitney_floor() -> None:
    assert smallest_p(3, 3) == pytest.approx(0.1)
    assert min_detectable(0.01, 3, 3, 0.05) == math.inf  # 3 against 3 can never reach 0.05
    assert math.isfinite(min_detectable(0.01, 4, 4, 0.05))  # 2/70 ≈ 0.029
    assert min_detectable(0.01, 1, 30, 0.05) == math.inf  # one baseline repeat: 2/31 > 0.05
    # 2/41 < 0.05, but a single repeat makes the interval span every resample: no model.
    assert min_detectable(0.01, 1, 40, 0.05) == math.inf
    assert min_detectable(0.0, 4, 4, 0.05) == pytest.approx(0.05)  # no noise: the band itself
    assert recommended_threshold(0.05, 1, 1) == math.inf


@pytest.mark.parametrize("comparisons", [1, 2, 8, 20])
def test_minimum_repeats_is_what_the_corrected_test_needs(comparisons: int) -> None:
    """At the minimum, one unmistakable change among ``comparisons`` tested together is a
    regression after Benjamini–Hochberg; one repeat fewer, it never can be."""

    def flagged(n: int) -> bool:
        quiet = [1.0 + 0.001 * i for i in range(n)]
        slow = [2.0 + 0.001 * i for i in range(n)]
        tested = [
            compare_metric("m", quiet, slow if k == 0 else quiet, direction="lower",
                           threshold=0.05)
            for k in range(comparisons)
        ]  # fmt: skip
        return correct(tested)[0].verdict == "regression"

    n = minimum_repeats(comparisons)
    assert flagged(n)
    assert not flagged(n - 1)
    assert minimum_repeats(1) == 4 and minimum_repeats(2) == 5


def test_repeats_needed_edges() -> None:
    assert repeats_needed(0.03, 0.05, 0.05) is None  # a change inside the band never flags
    assert repeats_needed(0.03, 0.02, 0.05) is None
    assert repeats_needed(0.0, 0.06, 0.05) == 4  # only the test's floor is left
    assert repeats_needed(0.3, 0.051, 0.05, max_repeats=20) is None
    assert repeats_needed_tuned(0.0, 0.001) == 4
    assert repeats_needed_tuned(0.5, 0.001) is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: noise_sigma([1.0]),
        lambda: noise_sigma([1.0, 0.0]),
        lambda: noise_sigma([1.0, math.nan]),
        lambda: noise_sigma([1.0, math.inf]),
        lambda: log_ratio_se(-0.1, 3, 3),
        lambda: log_ratio_se(0.1, 0, 3),
        lambda: min_detectable(0.1, 3, 3, 0.0),
        lambda: min_detectable(0.1, 3, 3, 0.05, power=1.0),
        lambda: repeats_needed(0.1, -0.1, 0.05),
        lambda: repeats_needed(0.1, 0.2, 0.05, max_repeats=1),
    ],
)
def test_bad_input_is_a_usage_error(call: Callable[[], object]) -> None:
    with pytest.raises(UsageError):
        call()


@settings(deadline=None)
@given(st.lists(positive, min_size=2, max_size=30), st.floats(min_value=1e-6, max_value=1e6))
def test_noise_is_scale_invariant(values: list[float], scale: float) -> None:
    sigma = noise_sigma(values)
    assert sigma >= 0
    assert noise_sigma([v * scale for v in values]) == pytest.approx(sigma, rel=1e-6, abs=1e-9)


@settings(deadline=None)
@given(sigmas, sigmas, repeats, repeats, thresholds)
def test_min_detectable_grows_with_noise(
    a: float, b: float, n_base: int, n_head: int, threshold: float
) -> None:
    low, high = sorted((a, b))
    quiet = min_detectable(low, n_base, n_head, threshold)
    noisy = min_detectable(high, n_base, n_head, threshold)
    assert threshold * (1 - 1e-12) <= quiet <= noisy
    assert math.isinf(quiet) == (smallest_p(n_base, n_head) > 0.05 or min(n_base, n_head) < 2)


@settings(deadline=None)
@given(sigmas, repeats, repeats, st.integers(min_value=1, max_value=20), thresholds)
def test_more_repeats_never_detect_less(
    sigma: float, n_base: int, n_head: int, extra: int, threshold: float
) -> None:
    now = min_detectable(sigma, n_base, n_head, threshold)
    assert min_detectable(sigma, n_base + extra, n_head, threshold) <= now
    assert min_detectable(sigma, n_base, n_head + extra, threshold) <= now
    band = recommended_threshold(sigma, n_base, n_head)
    assert recommended_threshold(sigma, n_base + extra, n_head + extra) <= band


@settings(deadline=None)
@given(sigmas, repeats, repeats, thresholds, thresholds)
def test_a_wider_band_needs_a_bigger_change(
    sigma: float, n_base: int, n_head: int, a: float, b: float
) -> None:
    narrow, wide = sorted((a, b))
    assert min_detectable(sigma, n_base, n_head, narrow) <= min_detectable(
        sigma, n_base, n_head, wide
    )


@settings(deadline=None)
@given(sigmas, sigmas, repeats, repeats)
def test_recommended_threshold_grows_with_noise(
    a: float, b: float, n_base: int, n_head: int
) -> None:
    low, high = sorted((a, b))
    assert (
        0
        <= recommended_threshold(low, n_base, n_head)
        <= recommended_threshold(high, n_base, n_head)
    )


@settings(max_examples=60, deadline=None)
@given(sigmas, st.floats(min_value=0.01, max_value=0.6), thresholds)
def test_repeats_needed_is_the_smallest_count_that_suffices(
    sigma: float, target: float, threshold: float
) -> None:
    needed = repeats_needed(sigma, target, threshold, max_repeats=80)
    if target <= threshold:
        assert needed is None
    elif needed is None:
        assert min_detectable(sigma, 80, 80, threshold) > target
    else:
        assert min_detectable(sigma, needed, needed, threshold) <= target
        assert needed == 2 or min_detectable(sigma, needed - 1, needed - 1, threshold) > target


@settings(max_examples=60, deadline=None)
@given(sigmas, sigmas, st.floats(min_value=0.01, max_value=0.6), thresholds, thresholds)
def test_repeats_needed_grows_with_noise_and_band(
    a: float, b: float, target: float, t1: float, t2: float
) -> None:
    quiet, noisy = sorted((a, b))
    narrow, wide = sorted((t1, t2))
    fewest = never(repeats_needed(quiet, target, narrow, max_repeats=80))
    assert fewest <= never(repeats_needed(noisy, target, narrow, max_repeats=80))
    assert fewest <= never(repeats_needed(quiet, target, wide, max_repeats=80))


@settings(max_examples=60, deadline=None)
@given(sigmas, sigmas, st.floats(min_value=0.005, max_value=0.6))
def test_tuned_repeats_detect_the_target_with_an_a_a_safe_band(
    a: float, b: float, target: float
) -> None:
    quiet, noisy = sorted((a, b))
    needed = repeats_needed_tuned(quiet, target, max_repeats=80)
    assert never(needed) <= never(repeats_needed_tuned(noisy, target, max_repeats=80))
    if needed is not None:
        band = recommended_threshold(quiet, needed, needed)
        if band < 1:  # the compare rule's thresholds live in (0, 1)
            assert min_detectable(quiet, needed, needed, max(band, 1e-12)) <= target * (1 + 1e-9)


def simulated_verdicts(
    effect: float, sigma: float, n: int, threshold: float, trials: int, seed: int
) -> list[str]:
    """Verdicts of the real compare rule on log-normal A/B samples with a known effect."""
    rng = np.random.default_rng(seed)
    verdicts: list[str] = []
    for trial in range(trials):
        base = np.exp(rng.normal(0.0, sigma, n))
        head = np.exp(rng.normal(math.log1p(effect), sigma, n))
        comparison = compare_metric(
            "step_time_s",
            base,  # type: ignore[arg-type]
            head,  # type: ignore[arg-type]
            direction="lower",
            threshold=threshold,
            seed=trial,
        )
        verdicts.append(correct([comparison])[0].verdict)
    return verdicts


@pytest.mark.slow
def test_the_model_predicts_the_real_compare_rule() -> None:
    """650 simulated comparisons: seconds, each runs the real 4000-resample bootstrap."""
    sigma, n, threshold = 0.03, 8, 0.05
    predicted = min_detectable(sigma, n, n, threshold)
    at_prediction = simulated_verdicts(predicted, sigma, n, threshold, 300, seed=1)
    assert at_prediction.count("regression") / 300 >= 0.85
    inside_band = simulated_verdicts(threshold / 2, sigma, n, threshold, 150, seed=2)
    assert inside_band.count("regression") == 0
    band = recommended_threshold(sigma, n, n)
    a_a = simulated_verdicts(0.0, sigma, n, band, 200, seed=3)
    assert a_a.count("no_change") / 200 >= 0.85
