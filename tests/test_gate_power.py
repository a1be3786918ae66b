"""The gate-power benchmark's machinery (``benchmarks/gate_power*.py``), on small simulated runs.

No real runs and no timings: the simulation, the anchor rules and the tallying must be right and
repeatable for the benchmark's table to mean anything.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import gate_power
import gate_power_real
import gate_power_rules as rules
from gate_power_samples import (
    Pair,
    RealPairs,
    RealPools,
    RealRepeat,
    SimulatedPairs,
    repeat_values,
)

from perfgate.stats.compare import compare_metric, correct


def test_every_rule_judges_the_same_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}

    def recording(
        name: str, judge: Callable[[np.ndarray, np.ndarray], rules.Outcome]
    ) -> Callable[[np.ndarray, np.ndarray], rules.Outcome]:
        def wrapped(base: np.ndarray, head: np.ndarray) -> rules.Outcome:
            seen.setdefault(name, []).append((base.copy(), head.copy()))
            return judge(base, head)

        return wrapped

    anchors = {
        key: rules.Rule(rule.name, rule.description, recording(key, rule.judge))
        for key, rule in gate_power.ANCHORS.items()
    }
    monkeypatch.setattr(gate_power, "ANCHORS", anchors)
    original = gate_power.perfgate_outcomes

    def perfgate(
        base: np.ndarray, head: np.ndarray, thresholds: Sequence[float]
    ) -> list[rules.Outcome]:
        seen.setdefault("perfgate", []).append((base.copy(), head.copy()))
        return original(base, head, thresholds)

    monkeypatch.setattr(gate_power, "perfgate_outcomes", perfgate)
    source = SimulatedPairs(gate_power.THIS_CPU, 5, seed=3, key=1)
    counts = gate_power.evaluate_chunk(source, (0.05, 0.2), 0, 3)

    calls = [len(v) for v in seen.values()]
    assert set(seen) == {"perfgate", *anchors} and calls == [3 * len(gate_power.CONDITIONS)] * 4
    for call in range(calls[0]):
        base, head = seen["perfgate"][call]
        for name in anchors:
            assert np.array_equal(seen[name][call][0], base)
            assert np.array_equal(seen[name][call][1], head)
    assert all(tally[2] == 3 for tally in counts.values())


def test_slowdown_scales_the_head_of_the_same_pair() -> None:
    source = SimulatedPairs(gate_power.GPU_QUIET, 5, seed=0, key=7)
    plain, slow = source.pair(0.0, 4), source.pair(0.10, 4)
    assert np.array_equal(plain.base, slow.base)
    np.testing.assert_allclose(slow.head, plain.head * 1.10)
    np.testing.assert_allclose(slow.head_steps, plain.head_steps * 1.10)
    assert not np.array_equal(plain.base, plain.head)  # A/A: two independent draws
    assert not np.array_equal(source.pair(0.0, 5).base, plain.base)


def test_repeat_value_is_the_median_of_the_steady_steps() -> None:
    steps = np.array([[5.0, 1.0, 1.1, 0.9, 1.0, 1.2, 0.95, 1.05]])
    # The leading 5.0 is a warm-up straggler that perfgate's steady-state check trims.
    assert repeat_values(steps)[0] == pytest.approx(float(np.median(steps[0, 1:])))


def test_fixed_threshold_catches_ten_percent_on_quiet_noise() -> None:
    source = SimulatedPairs(gate_power.GPU_QUIET, 5, seed=1, key=2)
    caught = [rules.fixed_judge(*_values(source.pair(0.10, i))) for i in range(300)]
    quiet = [rules.fixed_judge(*_values(source.pair(0.0, i))) for i in range(300)]
    assert caught.count("regression") >= 297
    assert quiet.count("regression") == 0


@pytest.mark.slow
def test_perfgate_has_few_false_positives_on_simulated_a_a_pairs() -> None:
    for model in (gate_power.GPU_QUIET, gate_power.THIS_CPU):
        source = SimulatedPairs(model, 5, seed=2, key=3)
        outcomes = [
            rules.perfgate_outcomes(*_values(source.pair(0.0, i)), (0.05,))[0] for i in range(150)
        ]
        assert outcomes.count("regression") <= 3, model.name


@pytest.mark.slow
def test_one_comparison_serves_every_threshold_exactly() -> None:
    source = SimulatedPairs(gate_power.THIS_CPU, 6, seed=5, key=4)
    thresholds = (0.05, 0.02, 0.3)
    for index in range(12):
        for slowdown in (0.0, 0.10, 0.30):
            base, head = _values(source.pair(slowdown, index))
            shared = rules.perfgate_outcomes(base, head, thresholds)
            direct = []
            for threshold in thresholds:
                (final,) = correct(
                    [
                        compare_metric(
                            "s",
                            base.tolist(),
                            head.tolist(),
                            direction="lower",
                            threshold=threshold,
                        )
                    ]
                )
                direct.append(final.verdict)
            mapped = ["pass" if v in ("no_change", "improvement") else v for v in direct]
            assert shared == mapped


def test_asv_cannot_use_its_test_at_five_or_six_repeats() -> None:
    base = np.linspace(1.0, 1.04, 5)
    far = base * 2
    # 5 vs 5: 1/252 > 0.002, so asv compares 99 % intervals of the medians instead.
    low, high = rules.asv_median_interval(base)
    assert low <= base.min() and high >= base.max()
    assert rules.asv_is_different(base, far)
    assert not rules.asv_is_different(base, base * 1.01)
    # 6 vs 6: asv admits the test (1/924 < 0.002), whose smallest two-sided p is 2/924.
    six = np.linspace(1.0, 1.05, 6)
    assert not rules.asv_is_different(six, six * 2)
    seven = np.linspace(1.0, 1.05, 7)
    assert rules.asv_is_different(seven, seven * 2)
    assert rules.asv_judge(seven, seven * 2) == "regression"
    assert rules.asv_judge(seven, seven * 1.05) == "pass"  # below the 1.1 factor


def test_laplace_posterior_quantile_matches_quadrature() -> None:
    values = np.array([1.0, 1.3, 0.8, 2.5, 1.1])
    n = len(values)

    def density(beta: float) -> float:
        return float(np.sum(np.abs(values - beta))) ** (-n)

    breaks = sorted(values.tolist())
    total = sum(
        integrate.quad(density, a, b)[0]
        for a, b in zip([-math.inf, *breaks], [*breaks, math.inf], strict=True)
    )
    for q in (0.005, 0.3, 0.5, 0.995):
        beta = rules.laplace_location_quantile(values, q)
        pieces = [-math.inf, *[b for b in breaks if b < beta], beta]
        mass = sum(integrate.quad(density, a, b)[0] for a, b in itertools.pairwise(pieces))
        assert mass / total == pytest.approx(q, abs=1e-6)


def test_pyperf_uses_its_own_t_table() -> None:
    expected = {8: 2.306, 18: 2.101, 30: 2.042, 35: 2.042, 45: 2.021, 150: 1.984, 300: 1.960}
    for df, value in expected.items():
        assert rules.pyperf_critical_value(df) == value
    base = np.array([1.0, 1.01, 0.99, 1.0, 1.02])
    assert rules.pyperf_judge(base, base * 1.2) == "regression"
    assert rules.pyperf_judge(base * 1.2, base) == "pass"  # faster is not a regression
    with pytest.raises(ValueError):
        rules.pyperf_judge(base, base[:4])


def test_real_pairs_split_and_match_rounds() -> None:
    rng = np.random.default_rng(0)
    rounds = 12

    def arm(level: float) -> list[RealRepeat]:
        return [
            RealRepeat(
                value=level * (1 + 0.01 * i),
                steps=tuple(level * (1 + 0.01 * i) * rng.uniform(0.95, 1.05, 4)),
                steady_start=0,
                wall_s=2.5,
                injected_s_per_step=None,
            )
            for i in range(rounds)
        ]

    pools = RealPools({"plain": arm(1.0), "canary-10%": arm(1.1)}, {})
    pairs = RealPairs.from_pools(pools, {0.0: "plain", 0.10: "canary-10%"}, 5, 0, 1)
    a_a = pairs.pair(0.0, 3)
    assert a_a is not None and not set(a_a.base) & set(a_a.head)
    slow = pairs.pair(0.10, 3)
    assert slow is not None
    np.testing.assert_allclose(slow.head, slow.base * 1.1)  # the same rounds on both sides
    too_many = RealPairs.from_pools(pools, {0.0: "plain", 0.10: "canary-10%"}, 7, 0, 1)
    assert too_many.pair(0.0, 0) is None and too_many.pair(0.10, 0) is not None
    window = pools.window(4, 10)
    assert window.rounds == 6 and window.meta["window"] == [4, 10]
    assert window.values("plain")[0] == pools.values("plain")[4]


def test_pools_round_trip_through_json(tmp_path: Path) -> None:
    repeat = RealRepeat(
        value=0.0011, steps=(0.0012, 0.0011), steady_start=1, wall_s=2.6, injected_s_per_step=1e-4
    )
    pools = RealPools({"plain": [repeat], "canary-2%": [repeat]}, {"workload": "mlp@smoke"})
    path = tmp_path / "pools.json"
    gate_power_real.save_pools(path, pools)
    loaded = gate_power_real.load_pools(path)
    assert loaded.arms == pools.arms and loaded.meta == pools.meta


@pytest.mark.slow
def test_same_seed_gives_the_same_table() -> None:
    args = gate_power.parse_args(
        ["--simulate-only", "--comparisons", "8", "--large-comparisons", "0", "--seed", "4"]
    )

    def table(jobs: int) -> list[str]:
        context = gate_power.Context()
        scenarios = [s for s in gate_power.simulated_scenarios(args, context) if s.repeats == 5]
        results = gate_power.evaluate(scenarios, jobs)
        return gate_power.table_lines(scenarios, results) + context.lines

    first = table(1)
    assert first == table(1)
    assert first == table(2)
    assert any("quiet GPU" in line for line in first)


def _values(pair: Pair | None) -> tuple[np.ndarray, np.ndarray]:
    assert pair is not None
    return pair.base, pair.head
