"""Where ``gate_power.py``'s sample pairs come from: a simulated noise model, or real repeats.

Both produce what perfgate's compare sees: one value per repeat (a fresh process), that value
being the median of the repeat's steady steps. They also keep the raw steps of each repeat, for
the variant of pyperf that pools every step as a value.

**Simulation** (:class:`NoiseModel`), hierarchical because that is how timing noise arises:

- each repeat (process) gets a level: a log-normal offset (between-process noise: memory
  layout, thread placement, clocks at start-up) and, with a small probability, a whole-repeat
  slow mode (a neighbour job, a different frequency state — the bimodality seen on shared CPUs);
- each step varies around its repeat's level with log-normal noise, and rarely stalls
  (a step several times longer: preemption, a page-cache miss);
- the repeat's value is the median of its steady steps, with perfgate's own steady-state trim.

An injected slowdown ``d`` multiplies the head's step times by ``1 + d``. Pairs use common random
numbers: the A/A pair and the 2/5/10 % pairs of one index share their noise, so differences
between the columns of a row come from the slowdown alone.

**Real pools** (:class:`RealPools`): per-repeat values of interleaved arms (plain and canaries,
measured by ``perfgate.runner.interleave.run_interleaved``), subsampled without replacement.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from perfgate.runner.steady import steady_start


@dataclass(frozen=True)
class Pair:
    """One comparison's samples: per-repeat values and the raw steps behind them."""

    base: np.ndarray
    head: np.ndarray
    base_steps: np.ndarray
    """(repeats, steps): every measured step of every base repeat."""
    head_steps: np.ndarray


class PairSource(Protocol):
    """Draws the ``index``-th pair of a condition (A/A when ``slowdown`` is 0)."""

    def pair(self, slowdown: float, index: int) -> Pair | None: ...


@dataclass(frozen=True, kw_only=True)
class NoiseModel:
    """A hierarchical timing-noise model of one machine (all noise figures relative)."""

    name: str
    steps: int
    """Measured steps per repeat."""
    step_sigma: float
    """Log-normal σ of a step around its repeat's level (≈ the step-level CV)."""
    process_sigma: float
    """Log-normal σ of a repeat's level (between-process noise)."""
    stall_probability: float
    """Chance that one step stalls."""
    stall_factor: float
    """How much longer a stalled step takes."""
    slow_mode_probability: float
    """Chance that a whole repeat runs in the slow mode (bimodality)."""
    slow_mode_factor: float
    """How much slower a slow-mode repeat is."""

    def describe(self) -> str:
        """The parameters, for the report."""
        return (
            f"{self.steps} steps a repeat; step noise log-normal σ {self.step_sigma:.1%}; "
            f"between-process σ {self.process_sigma:.1%}; stalls ×{self.stall_factor:g} "
            f"with p = {self.stall_probability:g} a step; slow mode ×{self.slow_mode_factor:g} "
            f"for {self.slow_mode_probability:.0%} of repeats"
        )

    def step_times(self, rng: np.random.Generator, repeats: int) -> np.ndarray:
        """(repeats, steps) step times around 1.0."""
        levels = np.exp(rng.normal(0.0, self.process_sigma, repeats))
        slow = rng.random(repeats) < self.slow_mode_probability
        levels = levels * np.where(slow, self.slow_mode_factor, 1.0)
        noise = np.exp(rng.normal(0.0, self.step_sigma, (repeats, self.steps)))
        stalls = rng.random((repeats, self.steps)) < self.stall_probability
        return levels[:, None] * noise * np.where(stalls, self.stall_factor, 1.0)


def repeat_values(steps: np.ndarray) -> np.ndarray:
    """Each repeat's value as perfgate computes it: the median of its steps after the
    steady-state trim (``perfgate.runner.steady.steady_start``)."""
    return np.array([float(np.median(row[steady_start(row.tolist()) :])) for row in steps])


@dataclass(frozen=True)
class SimulatedPairs:
    """Pairs of ``repeats`` a side from a noise model; pair ``index`` is a pure function of
    (seed, key, index), so any chunking of the work gives the same pairs."""

    model: NoiseModel
    repeats: int
    seed: int
    key: int

    def pair(self, slowdown: float, index: int) -> Pair:
        rng = np.random.default_rng([self.seed, self.key, index])
        base_steps = self.model.step_times(rng, self.repeats)
        head_steps = self.model.step_times(rng, self.repeats)
        factor = 1.0 + slowdown
        # The steady trim is scale-free, so the head's values simply scale with its steps.
        return Pair(
            repeat_values(base_steps),
            repeat_values(head_steps) * factor,
            base_steps,
            head_steps * factor,
        )


def model_sigma(model: NoiseModel, seed: int, repeats: int = 2000) -> float:
    """The model's between-repeat noise as calibrate measures it (``noise_sigma``: standard
    deviation of log repeat values), on many simulated A/A repeats so it is the model's own
    figure rather than one small calibration run's estimate of it."""
    from perfgate.stats.power import noise_sigma

    rng = np.random.default_rng([seed, 999])
    return noise_sigma(repeat_values(model.step_times(rng, repeats)).tolist())


@dataclass(frozen=True)
class RealRepeat:
    """One measured repeat of one arm."""

    value: float
    """The repeat's step time as ``perfgate.metrics.metric_values`` gives it."""
    steps: tuple[float, ...]
    steady_start: int
    wall_s: float
    injected_s_per_step: float | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RealRepeat:
        return cls(
            value=float(data["value"]),
            steps=tuple(float(s) for s in data["steps"]),
            steady_start=int(data["steady_start"]),
            wall_s=float(data["wall_s"]),
            injected_s_per_step=data.get("injected_s_per_step"),
        )


@dataclass(frozen=True)
class RealPools:
    """Interleaved real repeats: ``arms[label][round]``; every arm has the same rounds."""

    arms: dict[str, list[RealRepeat]]
    meta: dict[str, Any]

    @property
    def rounds(self) -> int:
        return min(len(repeats) for repeats in self.arms.values())

    def values(self, label: str) -> np.ndarray:
        return np.array([r.value for r in self.arms[label][: self.rounds]])

    def steps(self, label: str) -> np.ndarray:
        """(rounds, steps): every measured step (pyperf has no steady trim)."""
        return np.array([r.steps for r in self.arms[label][: self.rounds]])

    def window(self, start: int, stop: int) -> RealPools:
        """Rounds ``start`` … ``stop - 1`` only (0-based), e.g. one stretch of steady load;
        the window is recorded in ``meta`` so a report can say it was chosen."""
        arms = {label: repeats[start:stop] for label, repeats in self.arms.items()}
        loads = [r for r in self.meta.get("load_per_round", []) if start <= r["round"] < stop]
        meta = self.meta | {"window": [start, stop], "load_per_round": loads}
        return RealPools(arms, meta)


@dataclass(frozen=True)
class RealPairs:
    """Pairs subsampled without replacement from real pools.

    A/A: ``2 n`` distinct plain repeats split in two. A slowdown: ``n`` rounds, the plain and
    the canary repeat of each — the pairing an interleaved A/B run of ``n`` rounds would have.
    """

    values: dict[float, np.ndarray]
    """Slowdown → that arm's per-round values; 0.0 is the plain arm."""
    steps: dict[float, np.ndarray]
    """Slowdown → (rounds, steps) measured steps of that arm."""
    repeats: int
    seed: int
    key: int

    @classmethod
    def from_pools(
        cls, pools: RealPools, labels: dict[float, str], repeats: int, seed: int, key: int
    ) -> RealPairs:
        return cls(
            {d: pools.values(label) for d, label in labels.items()},
            {d: pools.steps(label) for d, label in labels.items()},
            repeats,
            seed,
            key,
        )

    def pair(self, slowdown: float, index: int) -> Pair | None:
        rounds = len(self.values[0.0])
        n = self.repeats
        if slowdown == 0.0:
            if 2 * n > rounds:
                return None
            rng = np.random.default_rng([self.seed, self.key, index, 0])
            chosen = rng.choice(rounds, size=2 * n, replace=False)
            base_rounds, head_rounds = chosen[:n], chosen[n:]
        else:
            if n > rounds:
                return None
            rng = np.random.default_rng([self.seed, self.key, index, 1])
            base_rounds = head_rounds = rng.choice(rounds, size=n, replace=False)
        return Pair(
            self.values[0.0][base_rounds],
            self.values[slowdown][head_rounds],
            self.steps[0.0][base_rounds],
            self.steps[slowdown][head_rounds],
        )


def measured_noise(repeats: Sequence[RealRepeat]) -> dict[str, float]:
    """Within- and between-process noise of one arm's real repeats, for the report.

    - within: per repeat, the robust σ (1.4826·MAD) of log steady steps, and the plain CV; the
      median over repeats;
    - stalls: the share of steady steps more than 2× (and 4×) their repeat's median;
    - between: ``noise_sigma`` (what calibrate uses: SD of log repeat values) and its robust
      counterpart (1.4826·MAD), which ignores a minority of slow repeats;
    - slow repeats: the share more than 15 % above the pool's median.
    """
    from perfgate.stats.power import noise_sigma

    robust, cvs, stall2, stall4, total = [], [], 0, 0, 0
    for repeat in repeats:
        steady = np.array(repeat.steps[repeat.steady_start :])
        median = float(np.median(steady))
        logs = np.log(steady / median)
        robust.append(1.4826 * float(np.median(np.abs(logs))))
        cvs.append(float(np.std(steady, ddof=1) / np.mean(steady)) if len(steady) > 1 else 0.0)
        stall2 += int(np.sum(steady > 2 * median))
        stall4 += int(np.sum(steady > 4 * median))
        total += len(steady)
    values = np.array([r.value for r in repeats])
    logs = np.log(values / np.median(values))
    return {
        "repeats": float(len(values)),
        "steady_steps_per_repeat": total / len(values),
        "within_robust_sigma": statistics.median(robust),
        "within_cv": statistics.median(cvs),
        "stall_share_2x": stall2 / total,
        "stall_share_4x": stall4 / total,
        "between_sigma": noise_sigma(values.tolist()),
        "between_robust_sigma": 1.4826 * float(np.median(np.abs(logs))),
        "slow_repeat_share": float(np.mean(values > 1.15 * np.median(values))),
        "median_step_s": float(np.median(values)),
        "median_wall_s": statistics.median(r.wall_s for r in repeats),
        "mean_wall_s": statistics.fmean(r.wall_s for r in repeats),
    }


def observed_slowdown(pools: RealPools, label: str, plain: str) -> float:
    """The canary's slowdown as measured: ratio of the arms' median repeat values − 1."""
    return float(np.median(pools.values(label)) / np.median(pools.values(plain))) - 1
