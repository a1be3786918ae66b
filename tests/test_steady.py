"""The steady-state check: leading warm-up steps are excluded, never more than half."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from perfgate.runner.steady import steady_start


def test_leading_slow_steps_are_excluded() -> None:
    times = [0.50, 0.31, 0.10, 0.101, 0.099, 0.1, 0.102, 0.098, 0.1, 0.1]
    assert steady_start(times) == 2


def test_steady_series_keeps_every_step() -> None:
    assert steady_start([0.1, 0.104, 0.097, 0.1, 0.101, 0.099, 0.1, 0.1]) == 0


def test_small_jitter_on_a_constant_series_is_not_warm_up() -> None:
    # MAD is zero here; a 5 % excess must not count as warm-up (MIN_RELATIVE_EXCESS).
    assert steady_start([0.105, 0.1, 0.1, 0.1, 0.1, 0.1]) == 0


def test_a_late_stall_is_kept() -> None:
    # A multi-second stall in the middle is noise for the statistics to see, not warm-up.
    assert steady_start([0.1, 0.1, 0.1, 3.0, 0.1, 0.1, 0.1, 0.1]) == 0


def test_short_series_are_left_alone() -> None:
    assert steady_start([5.0, 0.1, 0.1]) == 0


@given(st.lists(st.floats(min_value=1e-6, max_value=10.0), min_size=0, max_size=60))
def test_never_excludes_more_than_half(times: list[float]) -> None:
    start = steady_start(times)
    assert 0 <= start <= len(times) // 2
    # Everything excluded is slower than everything's median: warm-up is slow, never fast.
    if start:
        assert min(times[:start]) > sorted(times[len(times) // 2 :])[0]
