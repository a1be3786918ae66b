"""What ``perfgate bisect`` costs, against a linear scan, for ranges of 8, 32 and 128 commits.

Each trial plants one step change (+25 % or +10 % step time) at a random commit of the range
and answers every probe (an interleaved A/B of two commits) by simulating its rounds: the
noise of ``benchmarks/sequential_ab.py`` (simulated CPU: σ 9 % a side, a slow mode, stalls, a
drifting load; or a quiet GPU: σ 1 %) and perfgate's own sequential test on them
(``perfgate.stats.sequential``, threshold ±5 %, the device's default horizon), so a probe
costs the rounds that test really takes to decide, and can end inconclusive or wrong as it
would. The two strategies, on the same plants:

- **bisect**: ``perfgate.bisect.search.bisect_range``, the command's own search.
- **linear scan**: each commit against its parent, oldest first, until one regresses — the
  walk a person does by hand (every probe a full A/B).

Reported per range and effect: how often the culprit was named exactly (and how often the
strategy named a wrong commit, which must stay near zero), the median probes, the median and
95th-percentile rounds, and the wall time at the source's seconds per round (a forked CPU round
~1 s; a fresh CUDA worker pair ~11 s). Seeded: the same arguments give the same table.

Usage::

    python benchmarks/bisect_cost.py [--trials 200] [--seed 0] [--out benchmarks/bisect_cost.md]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from sequential_ab import CPU_HORIZON, GPU_HORIZON, sequential, simulated_cpu, simulated_gpu

from perfgate.bisect.search import bisect_range
from perfgate.documents.bisect import ProbeState

RANGES = (8, 32, 128)
EFFECTS = (0.25, 0.10)
STATES: dict[str, ProbeState] = {
    "regression": "regressed",
    "no_change": "unchanged",
    "improvement": "unchanged",
    "inconclusive": "inconclusive",
}


@dataclass(frozen=True)
class Probe:
    state: ProbeState
    rounds: int


@dataclass(frozen=True)
class Noise:
    name: str
    draw: Callable[[np.random.Generator, float, int], np.ndarray]
    horizon: int
    seconds_per_round: float


NOISES = (
    Noise("simulated CPU (σ 9 %, stalls, drifting load)", simulated_cpu, CPU_HORIZON, 1.0),
    Noise("simulated quiet GPU (σ 1 %)", simulated_gpu, GPU_HORIZON, 11.0),
)


@dataclass(frozen=True)
class Trial:
    named: int | None
    """The commit named as the culprit, or None (narrowed / nothing found)."""
    probes: int
    rounds: int
    culprit: int = 0
    """The commit the trial planted the change at."""


def prober(
    noise: Noise, rng: np.random.Generator, culprit: int, effect: float
) -> Callable[[int, int], Probe]:
    def probe(base: int, head: int) -> Probe:
        slowed = effect if base < culprit <= head else 0.0
        verdict, rounds = sequential(noise.draw(rng, slowed, noise.horizon), noise.horizon)
        return Probe(STATES[verdict], rounds)

    return probe


def bisected(count: int, probe: Callable[[int, int], Probe]) -> Trial:
    search = bisect_range(count, probe)
    named = search.first_bad if search.conclusion == "found" else None
    outcomes = [outcome for _, _, outcome in search.probes]
    return Trial(named, len(outcomes), sum(p.rounds for p in outcomes))


def scanned(count: int, probe: Callable[[int, int], Probe]) -> Trial:
    rounds = 0
    for head in range(1, count):
        outcome = probe(head - 1, head)
        rounds += outcome.rounds
        if outcome.state == "regressed":
            return Trial(head, head, rounds)
    return Trial(None, count - 1, rounds)


def cell(noise: Noise, count: int, effect: float, trials: int, seed: int) -> dict[str, list[Trial]]:
    rng = np.random.default_rng([seed, count, int(effect * 100)])
    results: dict[str, list[Trial]] = {"bisect": [], "linear scan": []}
    for _ in range(trials):
        culprit = int(rng.integers(1, count))
        for name, strategy in (("bisect", bisected), ("linear scan", scanned)):
            trial = strategy(count, prober(noise, rng, culprit, effect))
            results[name].append(replace(trial, culprit=culprit))
    return results


def rows(noise: Noise, trials: int, seed: int) -> list[str]:
    lines = [
        f"### {noise.name}, horizon {noise.horizon} rounds, {noise.seconds_per_round:g} s a round",
        "",
        "| commits | effect | strategy | culprit named | wrong commit named | median probes "
        "| median rounds | 95th pct rounds | median wall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for count in RANGES:
        for effect in EFFECTS:
            for name, found in cell(noise, count, effect, trials, seed).items():
                exact = sum(1 for t in found if t.named == t.culprit) / len(found)
                wrong = sum(1 for t in found if t.named not in (None, t.culprit)) / len(found)
                rounds = [t.rounds for t in found]
                median_rounds = statistics.median(rounds)
                lines.append(
                    f"| {count} | +{effect:.0%} | {name} | {exact:.1%} | {wrong:.1%} "
                    f"| {statistics.median(t.probes for t in found):g} | {median_rounds:g} "
                    f"| {np.percentile(rounds, 95):.0f} "
                    f"| {_wall(median_rounds * noise.seconds_per_round)} |"
                )
    return [*lines, ""]


def _wall(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [
        "## bisect against a linear scan",
        "",
        f"`python benchmarks/bisect_cost.py --trials {args.trials} --seed {args.seed}`: one "
        "step change planted at a random commit per trial; every probe's rounds simulated and "
        "judged by perfgate's sequential test (threshold ±5 %).",
        "",
    ]
    for noise in NOISES:
        lines += rows(noise, args.trials, args.seed)
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
