"""Sequential interleaved A/B against fixed-round A/B, side by side on the same rounds.

What it answers: how often each way of running the pull-request A/B raises a false alarm, how
often it catches +10 % and +25 %, and how many rounds (and seconds) it spends to get there. The
methods, each given the very same sequences of paired rounds:

- **sequential** — perfgate's verdict (``perfgate.stats.sequential``): after every round from
  the 4th the repeated confidence interval is updated, and the A/B stops at the first decision
  (regression, improvement, no change) or at the horizon (the CPU default, 200 rounds; 40 for
  the quiet GPU). Its error rates are meant to hold under this optional stopping.
- **fixed 5** and **fixed 20** — the fixed-size rule the gate applied to an A/B before
  (``perfgate.stats.compare``: Hodges–Lehmann ratio, expanded bootstrap interval, Mann–Whitney),
  on exactly 5 or 20 rounds.
- **fixed 20, peeked** — that rule looked at after every round from the 4th to the 20th,
  stopping at its first decision: the optional stopping that breaks a fixed-size test, shown so
  the reader sees what the sequential design protects against.

Sources of rounds (a round = one base and one head repeat measured back to back):

(a) simulated CPU: per-repeat log-normal noise (σ 9 % a side: what memory layout and the
    neighbours do to a process's median step on the 2-core CI machine), a ×1.2 slow mode in
    10 % of repeats, 2 % of repeats hit by a stall (×2–×10), and a machine load that drifts as
    a random walk (σ 5 % a round) and lands on both repeats of a round alike;
(b) simulated quiet GPU: σ 1 % a side, no stalls;
(c) recorded rounds from this machine (``--pool``): a user workload (a character-level GPT with
    hand-written attention, not a built-in) measured by perfgate's interleaved runner in four
    arms — two identical (A/A) and the canary at +10 % and +25 % (``--inject-slowdown``) —
    every round; trials resample whole rounds with replacement, so pairing and the neighbours'
    load within a round are kept. ``--record N`` measures a new pool (minutes).

Plus (d) the **stored-baseline path under a load step**: a baseline measured on a quiet machine
and a head on a busy one (and the reverse), with each side's measured run-queue wait; the
stored-baseline rule must answer *inconclusive* (the conditions differ), never a verdict.

Everything is seeded: the same arguments give the same table.

Usage::

    python benchmarks/sequential_ab.py [--trials 1000] [--pool FILE] [--quick] [--out FILE]
        [--record 120 --project benchmarks/user_gpt] [--threads T] [--jobs N] [--seed 0]

(``--pool`` defaults to ``benchmarks/data/interleaved_pool.json``.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfgate.compare.conditions import condition_blocks
from perfgate.compare.sequential import DEFAULT_MAX_ROUNDS
from perfgate.stats.compare import compare_metric, correct
from perfgate.stats.sequential import sequential_design, sequential_state

THRESHOLD = 0.05
EFFECTS = (0.0, 0.05, 0.10, 0.25)
FIXED_ROUNDS = (5, 20)
PEEK_LIMIT = 20
CPU_HORIZON = DEFAULT_MAX_ROUNDS["cpu"]
GPU_HORIZON = DEFAULT_MAX_ROUNDS["cuda"]
DEFAULT_POOL = Path(__file__).resolve().parent / "data" / "interleaved_pool.json"
ARMS = ("a", "b", "c10", "c25")
"""Pool arms: two identical (A/A), the canary at +10 % and at +25 %."""


@dataclass(frozen=True)
class Source:
    """Where a trial's rounds come from: ``draw(rng, effect, rounds)`` → (base, head) values."""

    name: str
    horizon: int
    seconds_per_round: float


def simulated_cpu(rng: np.random.Generator, effect: float, rounds: int) -> np.ndarray:
    """(2, rounds) step times: base then head, the head slowed by ``effect``."""
    load = np.exp(np.cumsum(rng.normal(0.0, 0.05, rounds)))
    sides = []
    for factor in (1.0, 1.0 + effect):
        noise = rng.normal(0.0, 0.09, rounds)
        noise += np.log(1.2) * (rng.random(rounds) < 0.10)
        stalls = rng.random(rounds) < 0.02
        noise[stalls] += np.log(rng.uniform(2.0, 10.0, stalls.sum()))
        sides.append(0.010 * factor * load * np.exp(noise))
    return np.array(sides)


def simulated_gpu(rng: np.random.Generator, effect: float, rounds: int) -> np.ndarray:
    return np.array(
        [0.050 * f * np.exp(rng.normal(0.0, 0.01, rounds)) for f in (1.0, 1.0 + effect)]
    )


class PoolDraw:
    """Rounds resampled with replacement from a recorded pool; the effect picks the arms."""

    def __init__(self, pool: dict[str, list[float]]) -> None:
        self.arms = {name: np.asarray(pool[name], dtype=float) for name in ARMS}
        self.rounds = len(self.arms["a"])

    def __call__(self, rng: np.random.Generator, effect: float, rounds: int) -> np.ndarray:
        head = {0.0: "b", 0.10: "c10", 0.25: "c25"}.get(effect)
        if head is None:
            raise ValueError(f"the pool has no arm for +{effect:.0%}")
        picks = rng.integers(0, self.rounds, rounds)
        first, second = self.arms["a"][picks], self.arms["b"][picks]
        # Which identical arm plays the base is drawn per round, so A/A is not one fixed pair.
        swap = rng.random(rounds) < 0.5
        base = np.where(swap, second, first)
        if head == "b":
            return np.array([base, np.where(swap, first, second)])
        return np.array([base, self.arms[head][picks]])


def sequential(rounds: np.ndarray, horizon: int) -> tuple[str, int]:
    design = sequential_design(horizon)
    logs = np.log(rounds[1]) - np.log(rounds[0])
    for n in range(design.min_rounds, horizon + 1):
        state = sequential_state(logs[:n], THRESHOLD, design, final=n == horizon)
        if state.verdict != "continue":
            return state.verdict, n
    raise AssertionError("unreachable: the horizon ends every comparison")


def fixed(rounds: np.ndarray, n: int, seed: int) -> str:
    comparison = compare_metric(
        "step_time_s",
        rounds[0, :n].tolist(),
        rounds[1, :n].tolist(),
        direction="lower",
        threshold=THRESHOLD,
        seed=seed,
    )
    return correct([comparison])[0].verdict


def peeked(rounds: np.ndarray, seed: int) -> tuple[str, int]:
    for n in range(4, PEEK_LIMIT + 1):
        verdict = fixed(rounds, n, seed)
        if verdict != "inconclusive":
            return verdict, n
    return "inconclusive", PEEK_LIMIT


METHODS = ("sequential", *(f"fixed {n}" for n in FIXED_ROUNDS), f"fixed {PEEK_LIMIT}, peeked")


def run_chunk(
    source: str, pool_path: str | None, effect: float, seeds: Sequence[int], horizon: int
) -> dict[str, list[tuple[str, int]]]:
    """Every method on the same rounds, for each seed (one trial per seed)."""
    draw: Callable[[np.random.Generator, float, int], np.ndarray]
    if source == "cpu":
        draw = simulated_cpu
    elif source == "gpu":
        draw = simulated_gpu
    else:
        assert pool_path is not None
        draw = PoolDraw(json.loads(Path(pool_path).read_text())["arms"])
    outcomes: dict[str, list[tuple[str, int]]] = {m: [] for m in METHODS}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        rounds = draw(rng, effect, max(horizon, PEEK_LIMIT, *FIXED_ROUNDS))
        outcomes["sequential"].append(sequential(rounds, horizon))
        for n in FIXED_ROUNDS:
            outcomes[f"fixed {n}"].append((fixed(rounds, n, seed), n))
        outcomes[f"fixed {PEEK_LIMIT}, peeked"].append(peeked(rounds, seed))
    return outcomes


def evaluate(
    source: str, pool: Path | None, horizon: int, trials: int, seed: int, jobs: int
) -> dict[float, dict[str, list[tuple[str, int]]]]:
    results: dict[float, dict[str, list[tuple[str, int]]]] = {}
    chunks = max(jobs, 1) * 4
    with ProcessPoolExecutor(max_workers=max(jobs, 1)) as executor:
        for effect in EFFECTS if source != "pool" else (0.0, 0.10, 0.25):
            seeds = [seed * 1_000_003 + int(effect * 1000) * 10_007 + i for i in range(trials)]
            futures = [
                executor.submit(
                    run_chunk, source, str(pool) if pool else None, effect, seeds[k::chunks],
                    horizon,
                )
                for k in range(chunks)
            ]  # fmt: skip
            merged: dict[str, list[tuple[str, int]]] = {m: [] for m in METHODS}
            for future in futures:
                for method, outcomes in future.result().items():
                    merged[method].extend(outcomes)
            results[effect] = merged
    return results


def table(
    title: str,
    results: dict[float, dict[str, list[tuple[str, int]]]],
    seconds_per_round: float,
) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| method | A/A false alarms | A/A no change | +5 % (at the threshold) called regression "
        "| +10 % caught | +25 % caught | median rounds (A/A, +10 %, +25 %) | median wall "
        "(A/A, +10 %, +25 %) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        row = [method]
        aa = results[0.0][method]
        row.append(_share(aa, ("regression", "improvement")))
        row.append(_share(aa, ("no_change",)))
        row.append(_share(results[0.05][method], ("regression",)) if 0.05 in results else "—")
        row.append(_share(results[0.10][method], ("regression",)))
        row.append(_share(results[0.25][method], ("regression",)))
        medians = [statistics.median(n for _, n in results[e][method]) for e in (0.0, 0.10, 0.25)]
        row.append(", ".join(f"{m:g}" for m in medians))
        row.append(", ".join(f"{m * seconds_per_round:.0f} s" for m in medians))
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def _share(outcomes: list[tuple[str, int]], verdicts: tuple[str, ...]) -> str:
    hits = sum(1 for verdict, _ in outcomes if verdict in verdicts)
    return f"{100 * hits / len(outcomes):.1f} %"


def stored_baseline_under_a_load_step(pool: dict[str, object]) -> list[str]:
    """(d): the recorded quiet and busy sides of the pool's load-step measurement."""
    step = pool.get("load_step")
    if not isinstance(step, dict):
        return ["(d) not in this pool: record it with --record (it measures a load step too)", ""]
    lines = [
        "### (d) Stored baseline across a load step (recorded)",
        "",
        "| baseline | head | head/base step time | conditions check | verdict |",
        "|---|---|---|---|---|",
    ]
    for case in step["cases"]:
        base, head = case["base"], case["head"]
        comparison = correct(
            [
                compare_metric(
                    "step_time_s",
                    base["values"],
                    head["values"],
                    direction="lower",
                    threshold=THRESHOLD,
                    seed=0,
                )
            ]
        )[0]
        blocks, _ = condition_blocks(
            {"runqueue_wait_share": base["runqueue_wait"], "other_cpu_cores": base["other_cpu"]},
            {"runqueue_wait_share": head["runqueue_wait"], "other_cpu_cores": head["other_cpu"]},
            THRESHOLD,
            baseline_canary=False,
            head_canary=bool(case.get("head_canary")),
        )
        verdict = "inconclusive" if blocks else comparison.verdict
        lines.append(
            f"| {case['base_label']} | {case['head_label']} | {comparison.ratio:.3f} "
            f"({comparison.ci_low:.3f}–{comparison.ci_high:.3f}) | "
            f"{'differ' if blocks else 'same'} | {verdict} (rule alone: {comparison.verdict}) |"
        )
    return [*lines, ""]


def record(rounds: int, project: Path, out: Path, threads: int | None) -> None:
    """Measure a pool: four interleaved arms of the project's first workload for ``rounds``
    rounds, then the load step (a quiet and a busy stored-baseline pair)."""
    from perfgate.config import load_config
    from perfgate.metrics import condition_values, metric_values
    from perfgate.runner.interleave import Arm, run_interleaved
    from perfgate.runner.orchestrator import run_workloads
    from perfgate.runner.plan import Selection, prepare
    from perfgate.telemetry.fingerprint import collect_fingerprint

    os.chdir(project)
    config = load_config()
    arms = []
    for label, slowdown in zip(ARMS, (None, None, 0.10, 0.25), strict=True):
        plan, settings = prepare(
            config, Selection(threads=threads, inject_slowdown=slowdown, repeats=rounds)
        )
        arms.append(Arm(label=label, plan=plan[:1], settings=settings))
    environment = collect_fingerprint("cpu", arms[0].settings.threads)
    started = time.monotonic()
    loads: list[float] = []

    class Progress:
        def round_finished(
            self, workload: str, index: int, total: int, reading: str | None = None
        ) -> None:
            loads.append(os.getloadavg()[0])
            print(f"round {index + 1}/{total} load {loads[-1]:.2f}", flush=True)

    measured = run_interleaved(arms, "cpu", environment, rounds=rounds, observer=Progress())
    wall = time.monotonic() - started
    pool: dict[str, object] = {
        "arms": {
            arm.label: metric_values(results[0])["step_time_s"]
            for arm, results in zip(arms, measured, strict=True)
        },
        "meta": {
            "workload": arms[0].plan[0].definition.name,
            "project": project.name,
            "rounds": rounds,
            "seconds_per_round": wall / rounds / len(ARMS) * 2,
            "load_per_round": loads,
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cpu_count": os.cpu_count(),
        },
    }

    def side(label: str, busy: bool, canary: float | None = None) -> dict[str, object]:
        plan, settings = prepare(
            config, Selection(threads=threads, repeats=8, inject_slowdown=canary)
        )
        hogs = [_hog() for _ in range(2)] if busy else []
        try:
            (result, *_) = run_workloads(plan[:1], settings, "cpu", environment)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        conditions = condition_values(result)
        return {
            "label": label,
            "values": metric_values(result)["step_time_s"],
            "runqueue_wait": conditions.get("condition.runqueue_wait_share", []),
            "other_cpu": conditions.get("condition.other_cpu_cores", []),
        }

    quiet, busy = side("quiet", False), side("busy (2 CPU hogs)", True)
    busy_slow = side("busy, head +25 %", True, 0.25)
    quiet_slow = side("quiet, head +25 %", False, 0.25)
    pool["load_step"] = {
        "cases": [
            {"base_label": "quiet", "head_label": "busy", "base": quiet, "head": busy},
            {"base_label": "busy", "head_label": "quiet", "base": busy, "head": quiet},
            {"base_label": "busy", "head_label": "quiet, +25 %", "base": busy, "head": quiet_slow},
            {"base_label": "quiet", "head_label": "busy, +25 %", "base": quiet, "head": busy_slow},
        ]
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(pool, indent=1) + "\n")
    print(f"pool written to {out}")


def _hog() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="100 trials")
    parser.add_argument("--pool", type=Path, default=DEFAULT_POOL)
    parser.add_argument("--record", type=int, default=0, help="measure a pool of N rounds first")
    parser.add_argument("--project", type=Path, default=None, help="--record: the project")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    trials = 100 if args.quick else args.trials
    if args.record:
        if args.project is None:
            parser.error("--record needs --project (a folder with [tool.perfgate])")
        record(args.record, args.project.resolve(), args.pool.resolve(), args.threads)
    started = time.monotonic()
    lines = [
        "## Sequential A/B against fixed rounds",
        "",
        f"`python benchmarks/sequential_ab.py {' '.join(argv or sys.argv[1:])}`: {trials} trials "
        f"a cell, threshold ±{THRESHOLD:.0%}, seed {args.seed}.",
        "",
    ]
    simulated = [
        ("(a) Simulated CPU (σ 9 % a side, slow mode, stalls, drifting load; 1 s a round, as a "
         "forked round of a 10 ms step costs here)", "cpu", CPU_HORIZON, 1.0),
        ("(b) Simulated quiet GPU (σ 1 % a side; 12 s a round, two spawned CUDA workers on an "
         "H200)", "gpu", GPU_HORIZON, 12.0),
    ]  # fmt: skip
    for title, source, horizon, seconds in simulated:
        results = evaluate(source, None, horizon, trials, args.seed, args.jobs)
        lines += table(f"{title}, horizon {horizon}", results, seconds)
    if args.pool.is_file():
        pool = json.loads(args.pool.read_text())
        meta = pool["meta"]
        results = evaluate("pool", args.pool, CPU_HORIZON, trials, args.seed, args.jobs)
        observed = {
            arm: math.exp(
                statistics.median(
                    np.log(np.asarray(pool["arms"][arm]) / np.asarray(pool["arms"]["a"]))
                )
            )
            for arm in ARMS[1:]
        }
        lines += table(
            f"(c) Recorded rounds: {meta['workload']} ({meta['project']}), {meta['rounds']} "
            f"rounds on {meta['cpu_count']} CPUs, {meta['recorded_at']}, load "
            f"{min(meta['load_per_round']):.1f}–{max(meta['load_per_round']):.1f}; median "
            "head/base " + ", ".join(f"{arm} {ratio:.3f}" for arm, ratio in observed.items()),
            results,
            float(meta["seconds_per_round"]),
        )
        lines += stored_baseline_under_a_load_step(pool)
    else:
        lines += [f"(c), (d): no pool at {args.pool} (record one with --record N --project DIR)"]
    lines.append(f"Analysis took {time.monotonic() - started:.0f} s.")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
