"""Change points in benchmark histories: steps are found where they are, noise and spikes never."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.errors import UsageError
from perfgate.stats.changepoints import ChangePoint, find_change_points, newest_stable_segment

SEEDS = range(10)


def noise(seed: int, n: int, cv: float, level: float = 100.0) -> np.ndarray:
    """Gaussian benchmark noise: ``level`` with coefficient of variation ``cv``."""
    return level * (1.0 + cv * np.random.default_rng(seed).standard_normal(n))


def shared_ci_cpu(seed: int, n: int = 200) -> np.ndarray:
    """10 % CV with occasional 5× stalls (3 % of runs), like a shared CI runner."""
    rng = np.random.default_rng(seed)
    values = 100.0 * (1.0 + 0.10 * rng.standard_normal(n))
    values[rng.random(n) < 0.03] *= 5.0
    return values


def indexes(change_points: list[ChangePoint]) -> list[int]:
    return [point.index for point in change_points]


# --- steps are found, at the right index -------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_ten_percent_step_is_found_at_its_exact_index(seed: int) -> None:
    values = noise(seed, 70, cv=0.02)
    values[30:] *= 1.10
    [step] = find_change_points(values.tolist())
    assert step.index == 30
    assert step.relative_change == pytest.approx(0.10, abs=0.02)
    assert step.median_after / step.median_before - 1 == pytest.approx(step.relative_change)
    assert step.p_value is not None and step.p_value <= 0.001


@pytest.mark.parametrize("seed", SEEDS)
def test_improvement_is_a_negative_change(seed: int) -> None:
    values = noise(seed, 60, cv=0.02)
    values[30:] *= 0.90
    [step] = find_change_points(values.tolist())
    assert step.index == 30
    assert step.relative_change == pytest.approx(-0.10, abs=0.02)


@pytest.mark.parametrize("seed", SEEDS)
def test_up_then_down_both_found_in_order(seed: int) -> None:
    values = noise(seed, 120, cv=0.02)
    values[40:80] *= 1.10
    up, down = find_change_points(values.tolist())
    assert (up.index, down.index) == (40, 80)
    assert up.relative_change == pytest.approx(0.10, abs=0.025)
    assert down.relative_change == pytest.approx(1 / 1.10 - 1, abs=0.025)


def test_noise_free_step_is_found() -> None:
    """Most consecutive differences are 0, so the noise scale falls back to the mean difference."""
    [step] = find_change_points([10.0] * 20 + [12.0] * 20)
    assert (step.index, step.median_before, step.median_after) == (20, 10.0, 12.0)
    assert step.relative_change == pytest.approx(0.2)


def test_step_in_the_newest_points_waits_for_min_segment() -> None:
    base = noise(3, 40, cv=0.02).tolist()
    assert find_change_points([*base, *[150.0] * 4]) == []
    assert indexes(find_change_points([*base, *[150.0] * 5])) == [40]


def test_steps_smaller_than_min_relative_change_are_ignored() -> None:
    """A 1.5 % step at 0.2 % CV is significant but, by default, not meaningful."""
    values = noise(4, 60, cv=0.002)
    values[30:] *= 1.015
    assert find_change_points(values.tolist()) == []
    assert indexes(find_change_points(values.tolist(), min_relative_change=0.01)) == [30]


def test_max_p_value_gates_steps() -> None:
    values = noise(5, 60, cv=0.02)
    values[30:] *= 1.10
    [step] = find_change_points(values.tolist())
    assert step.p_value is not None
    assert find_change_points(values.tolist(), max_p_value=step.p_value / 2) == []


# --- noise and spikes are never steps -----------------------------------------------------------


@pytest.mark.parametrize("cv", [0.02, 0.10])
@pytest.mark.parametrize("seed", range(12))
def test_pure_noise_has_no_change_points(seed: int, cv: float) -> None:
    assert find_change_points(noise(seed, 200, cv).tolist()) == []


@pytest.mark.parametrize("position", [0, 1, 2, 57, 100, 197, 198, 199])
@pytest.mark.parametrize("seed", range(5))
def test_single_three_x_spike_is_not_a_change_point(seed: int, position: int) -> None:
    values = noise(seed, 200, cv=0.02)
    values[position] *= 3.0
    assert find_change_points(values.tolist()) == []


@pytest.mark.parametrize("seed", range(10))
def test_shared_ci_cpu_noise_with_stalls_has_no_change_points(seed: int) -> None:
    assert find_change_points(shared_ci_cpu(seed).tolist()) == []


# --- input handling ------------------------------------------------------------------------------


def test_too_short_or_constant_histories_have_none() -> None:
    assert find_change_points([]) == []
    assert find_change_points([1.0, 5.0] * 4 + [1.0]) == []  # 9 < 2 * min_segment
    assert find_change_points([3.0] * 100) == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_a_usage_error(bad: float) -> None:
    values = [100.0] * 20
    values[7] = bad
    with pytest.raises(UsageError, match=r"non-finite value .* at index 7") as raised:
        find_change_points(values)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_non_positive_values_are_a_usage_error(bad: float) -> None:
    with pytest.raises(UsageError, match=r"non-positive value .* at index 3"):
        find_change_points([1.0, 1.0, 1.0, bad] + [1.0] * 20)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_segment": 1}, "min_segment must be at least 2"),
        ({"max_p_value": 0.0}, "max_p_value must be in"),
        ({"min_relative_change": -0.1}, "min_relative_change must be"),
    ],
)
def test_bad_options_are_a_usage_error(options: dict[str, float], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        find_change_points([1.0] * 20, **options)  # type: ignore[arg-type]


def test_two_dimensional_values_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="flat sequence"):
        find_change_points(np.ones((10, 2)))  # type: ignore[arg-type]


# --- newest_stable_segment ---------------------------------------------------------------------


def step_at(index: int) -> ChangePoint:
    return ChangePoint(index, 1.0, 1.1, 0.1, 1e-6)


def test_newest_stable_segment_without_change_points_is_everything() -> None:
    assert newest_stable_segment([1.0] * 12, []) == (0, 12)


def test_newest_stable_segment_starts_at_the_last_change_point() -> None:
    assert newest_stable_segment([1.0] * 50, [step_at(20)]) == (20, 50)
    assert newest_stable_segment([1.0] * 50, [step_at(20), step_at(35)]) == (35, 50)


def test_newest_stable_segment_of_a_found_step() -> None:
    values = noise(0, 60, cv=0.02)
    values[30:] *= 1.10
    history = values.tolist()
    assert newest_stable_segment(history, find_change_points(history)) == (30, 60)


@pytest.mark.parametrize("index", [0, 50, 51])
def test_newest_stable_segment_rejects_change_points_of_another_history(index: int) -> None:
    with pytest.raises(UsageError, match=f"index {index} is outside a history of 50"):
        newest_stable_segment([1.0] * 50, [step_at(index)])


# --- properties ----------------------------------------------------------------------------------

positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def histories(draw: st.DrawFn) -> list[float]:
    """Piecewise-constant levels with multiplicative noise, or arbitrary positive values."""
    if draw(st.booleans()):
        return draw(st.lists(positive, max_size=60))
    levels = draw(st.lists(st.floats(min_value=1.0, max_value=1000.0), min_size=1, max_size=4))
    lengths = draw(st.lists(st.integers(1, 30), min_size=len(levels), max_size=len(levels)))
    cv = draw(st.sampled_from([0.0, 0.01, 0.05, 0.1]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    means = np.repeat(levels, lengths)
    return list(means * np.exp(cv * rng.standard_normal(len(means))))


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(2, 8))
def test_property_deterministic(values: list[float], min_segment: int) -> None:
    first = find_change_points(values, min_segment=min_segment)
    assert find_change_points(values, min_segment=min_segment) == first


@settings(max_examples=150, deadline=None)
@given(histories(), st.sampled_from([1e-4, 0.37, 3.0, 1024.0, 7.5e5]))
def test_property_scale_invariant(values: list[float], factor: float) -> None:
    scaled = [value * factor for value in values]
    assert indexes(find_change_points(scaled)) == indexes(find_change_points(values))


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(2, 8))
def test_property_every_segment_has_min_segment_points(
    values: list[float], min_segment: int
) -> None:
    found = find_change_points(values, min_segment=min_segment)
    bounds = [0, *indexes(found), len(values)]
    if found:
        assert all(end - start >= min_segment for start, end in itertools.pairwise(bounds))
    assert newest_stable_segment(values, found) == (bounds[-2], len(values))
    for point in found:
        assert point.p_value is not None and point.p_value <= 0.001
        assert abs(point.relative_change) >= 0.02


@settings(max_examples=100, deadline=None)
@given(st.lists(positive, max_size=9), st.integers(1, 200), positive)
def test_property_tiny_or_constant_histories_have_none(
    tiny: list[float], length: int, level: float
) -> None:
    assert find_change_points(tiny) == []
    assert find_change_points([level] * length) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(positive, min_size=1, max_size=40), st.data())
def test_property_non_finite_values_are_rejected(values: list[float], data: st.DataObject) -> None:
    position = data.draw(st.integers(0, len(values) - 1))
    values[position] = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    with pytest.raises(UsageError, match=f"at index {position}"):
        find_change_points(values)
