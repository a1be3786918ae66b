"""Power of the regression gate: perfgate's rule against asv, pyperf and a fixed 7 %, side by side.

Why: a gate is only worth its false alarms and its misses. This benchmark measures both for
perfgate's compare rule and for the rules of the tools it is measured against, on the very same
sample pairs, so a difference between two rows is the rules' doing and nothing else:

- **perfgate** at the default 5 % threshold and at the threshold ``perfgate calibrate`` would
  recommend for that noise and repeat count (``perfgate.stats.power.recommended_threshold``);
- **asv** (Mann–Whitney p < 0.002 and a 1.1× factor), **pyperf** ``compare_to`` (Student t at
  95 %, no minimum change; also as pyperf is used, every step pooled), and a **fixed 7 %**
  threshold (TorchBench) — see ``gate_power_rules.py`` for each rule's exact definition.

For each rule it reports the false-positive rate on A/A pairs (perfgate's *inconclusive* is not
a failure, and is reported separately) and the detection rate of injected slowdowns of 2, 5 and
10 %, on:

(a) simulated samples from hierarchical noise models (``gate_power_samples.py``): a quiet GPU
    (1 % step noise) and this CPU (≈10 % step noise, between-process noise, 5× stalls and a slow
    mode), at 5 repeats a side and at the repeats calibrate says a 10 % change needs here;
(b) real repeats of a workload on this CPU, plain and canary (``--inject-slowdown``) arms
    interleaved by perfgate's runner, subsampled without replacement into the same comparisons
    (``gate_power_real.py``; cached as JSON so the analysis re-runs without re-measuring).

Everything is seeded; the same seed gives the same table, whatever ``--jobs``.

Usage::

    python benchmarks/gate_power.py [--comparisons 1000] [--large-comparisons N] [--quick]
        [--simulate-only] [--pools .perfgate/gate_power_pools.json] [--measure] [--rounds 40]
        [--workload mlp@smoke] [--threads T] [--threshold 0.01]… [--out FILE] [--jobs N]
        [--seed 0]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import math
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from gate_power_real import PLAIN, canary_label, load_pools, measure_pools, save_pools
from gate_power_rules import (
    ASV,
    FIXED,
    PERFGATE_DESCRIPTION,
    PYPERF,
    Outcome,
    perfgate_outcomes,
    pyperf_all_values,
)
from gate_power_samples import (
    NoiseModel,
    Pair,
    PairSource,
    RealPairs,
    RealPools,
    SimulatedPairs,
    measured_noise,
    model_sigma,
    observed_slowdown,
)
from scipy import stats

from perfgate.metrics import METRICS
from perfgate.stats.power import (
    min_detectable,
    noise_sigma,
    recommended_threshold,
    repeats_needed,
    repeats_needed_tuned,
)

SLOWDOWNS = (0.02, 0.05, 0.10)
CONDITIONS = (0.0, *SLOWDOWNS)
"""0.0 is the A/A condition."""
DEFAULT_THRESHOLD = METRICS["step_time_s"].threshold
SMALL_REPEATS = 5
GPU_TARGET = 0.02
CPU_TARGET = 0.10
FP_TARGET = 0.01
DETECTION_TARGET = 0.95
LARGE_REPEATS = 40
"""Beyond this many repeats a side a block gets ``--large-comparisons`` pairs: perfgate's
bootstrap of the pairwise (Hodges–Lehmann) ratio holds resamples × n² differences, about 5 s and
1.2 GB a comparison at 140 repeats on this machine, so 1,000 pairs × 4 conditions would take
hours there."""
CHUNK = 25
"""Comparisons per unit of parallel work."""

GPU_QUIET = NoiseModel(
    name="quiet GPU (simulated)",
    steps=50,  # the full preset's measured steps
    step_sigma=0.01,
    process_sigma=0.003,
    stall_probability=0.001,
    stall_factor=5.0,
    slow_mode_probability=0.0,
    slow_mode_factor=1.0,
)
THIS_CPU = NoiseModel(
    name="this CPU (simulated)",
    steps=12,  # the smoke preset's measured steps
    # The picture of this runner (≈10 % step CV, rare 5× stalls, a slow mode). Step
    # noise matches what mlp@smoke measured here (robust σ 7–8 %); between-process noise sits
    # above quiet stretches (2.6–3 %) and far below contended ones, where a quarter of the
    # repeats ran 15–170× slower (benchmarks/gate_power.md).
    step_sigma=0.09,
    process_sigma=0.06,
    stall_probability=0.01,
    stall_factor=5.0,
    slow_mode_probability=0.10,
    slow_mode_factor=1.2,
)

ANCHORS = {"asv": ASV, "pyperf": PYPERF, "fixed": FIXED}
PYPERF_STEPS = "pyperf-steps"


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One block of the table: where pairs come from, how many repeats, which thresholds."""

    kind: str
    """``gpu``, ``cpu`` (simulated) or ``real``: which targets the block is checked against."""
    title: str
    source: PairSource
    repeats: int
    comparisons: int
    """Pairs per condition (fewer for large repeat counts: see :data:`LARGE_REPEATS`)."""
    thresholds: tuple[float, ...]
    """perfgate's practical thresholds: the default first, then calibrate's recommendation."""
    threshold_notes: tuple[str, ...]


Counts = dict[tuple[str, float], list[int]]
"""(row, slowdown) → [regressions, inconclusive, pairs judged]."""


def perfgate_row(index: int) -> str:
    return f"perfgate:{index}"


def judge_pair(pair: Pair, thresholds: Sequence[float]) -> dict[str, Outcome]:
    """Every rule's outcome on one pair: the same samples for all of them."""
    outcomes: dict[str, Outcome] = {
        perfgate_row(i): outcome
        for i, outcome in enumerate(perfgate_outcomes(pair.base, pair.head, thresholds))
    }
    for key, rule in ANCHORS.items():
        outcomes[key] = rule.judge(pair.base, pair.head)
    outcomes[PYPERF_STEPS] = pyperf_all_values(pair.base_steps, pair.head_steps)
    return outcomes


def evaluate_chunk(
    source: PairSource, thresholds: tuple[float, ...], start: int, stop: int
) -> Counts:
    """Tally outcomes of pairs ``start`` … ``stop - 1`` under every condition."""
    counts: Counts = {}
    for index in range(start, stop):
        for slowdown in CONDITIONS:
            pair = source.pair(slowdown, index)
            if pair is None:
                continue
            for row, outcome in judge_pair(pair, thresholds).items():
                tally = counts.setdefault((row, slowdown), [0, 0, 0])
                tally[0] += outcome == "regression"
                tally[1] += outcome == "inconclusive"
                tally[2] += 1
    return counts


def evaluate(scenarios: Sequence[Scenario], jobs: int) -> list[Counts]:
    """Tallies per scenario; chunks run in ``jobs`` processes (results do not depend on it)."""
    work = [
        (position, scenario, start, min(start + CHUNK, scenario.comparisons))
        for position, scenario in enumerate(scenarios)
        for start in range(0, scenario.comparisons, CHUNK)
    ]
    results: list[Counts] = [{} for _ in scenarios]

    def merge(position: int, counts: Counts) -> None:
        for key, (regressions, inconclusive, judged) in counts.items():
            tally = results[position].setdefault(key, [0, 0, 0])
            tally[0] += regressions
            tally[1] += inconclusive
            tally[2] += judged

    if jobs <= 1:
        for position, scenario, start, stop in work:
            merge(position, evaluate_chunk(scenario.source, scenario.thresholds, start, stop))
        return results
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [
            (
                position,
                pool.submit(evaluate_chunk, scenario.source, scenario.thresholds, start, stop),
            )
            for position, scenario, start, stop in work
        ]
        for position, future in futures:
            merge(position, future.result())
    return results


def rate(counts: Counts, row: str, slowdown: float, column: int = 0) -> float | None:
    """Share of judged pairs with a regression (column 0) or inconclusive (column 1)."""
    tally = counts.get((row, slowdown))
    if not tally or tally[2] == 0:
        return None
    return tally[column] / tally[2]


def row_labels(scenario: Scenario) -> dict[str, str]:
    labels = {
        perfgate_row(i): f"perfgate @ {t:.2%} ({note})"
        for i, (t, note) in enumerate(
            zip(scenario.thresholds, scenario.threshold_notes, strict=True)
        )
    }
    labels |= {key: rule.name for key, rule in ANCHORS.items()}
    labels[PYPERF_STEPS] = "pyperf, every step pooled"
    return labels


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def table_lines(scenarios: Sequence[Scenario], results: Sequence[Counts]) -> list[str]:
    """The markdown table: rule × scenario."""
    lines = [
        "| scenario | rule | false positives (A/A) | inconclusive (A/A) | detected 2 % "
        "| detected 5 % | detected 10 % | inconclusive at 2 / 5 / 10 % |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for scenario, counts in zip(scenarios, results, strict=True):
        for row, label in row_labels(scenario).items():
            judged = counts.get((row, 0.0), [0, 0, 0])[2]
            detected = [_percent(rate(counts, row, d)) for d in SLOWDOWNS]
            inconclusive = " / ".join(_percent(rate(counts, row, d, 1)) for d in SLOWDOWNS)
            is_perfgate = row.startswith("perfgate")
            lines.append(
                f"| {scenario.title}, n = {scenario.repeats} ({judged} A/A pairs) | {label} "
                f"| {_percent(rate(counts, row, 0.0))} "
                f"| {_percent(rate(counts, row, 0.0, 1)) if is_perfgate else '–'} "
                f"| {' | '.join(detected)} | {inconclusive if is_perfgate else '–'} |"
            )
    return lines


def wilson_upper(successes: int, trials: int, confidence: float = 0.95) -> float:
    """Upper end of the Wilson score interval of a binomial proportion."""
    if trials == 0:
        return 1.0
    z = float(stats.norm.ppf(1 - (1 - confidence) / 2))
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return min(1.0, (centre + spread) / (1 + z * z / trials))


def target_lines(scenarios: Sequence[Scenario], results: Sequence[Counts]) -> list[str]:
    """The issue's targets, each checked against the table."""
    lines = [
        _false_positive_line(scenarios, results, configured=True),
        _false_positive_line(scenarios, results, configured=False),
    ]
    for scenario, counts in zip(scenarios, results, strict=True):
        if scenario.kind == "gpu" and scenario.repeats == SMALL_REPEATS:
            lines.append(_detection_line(scenario, counts, GPU_TARGET, "at 1 % CV, 5 repeats"))
        if scenario.kind in ("cpu", "real") and scenario.repeats != SMALL_REPEATS:
            lines.append(_detection_line(scenario, counts, CPU_TARGET, "on this CPU"))
    for scenario, counts in zip(scenarios, results, strict=True):
        lines.append(
            f"- Fewer false alarms at equal or better detection, {scenario.title}, "
            f"n = {scenario.repeats}:"
        )
        for key, rule in ANCHORS.items():
            lines.append(f"  - vs {rule.name}: {_dominance(scenario, counts, key)}")
    return lines


def _false_positive_line(
    scenarios: Sequence[Scenario], results: Sequence[Counts], *, configured: bool
) -> str:
    """The worst A/A false-positive rate over perfgate's configured rows (the default and
    calibrate's threshold: the target) or over the ``--threshold`` rows (shown, not judged)."""
    worst = (-1.0, "", 0, 0)
    for scenario, counts in zip(scenarios, results, strict=True):
        for i, note in enumerate(scenario.threshold_notes):
            tally = counts.get((perfgate_row(i), 0.0))
            if (note != "--threshold") != configured or not tally or not tally[2]:
                continue
            if tally[0] / tally[2] > worst[0]:
                where = (
                    f"{scenario.title}, n = {scenario.repeats}, "
                    f"threshold {scenario.thresholds[i]:.2%}"
                )
                worst = (tally[0] / tally[2], where, tally[0], tally[2])
    fp, where, hits, trials = worst
    if fp < 0:
        return "- (no --threshold rows)" if not configured else "- (no A/A pairs)"
    detail = (
        f"worst {fp:.1%} ({hits}/{trials}, Wilson 95 % upper bound "
        f"{wilson_upper(hits, trials):.1%}) in {where}"
    )
    if configured:
        verdict = "MET" if fp <= FP_TARGET else "MISSED"
        return (
            f"- False positives ≤ {FP_TARGET:.0%} everywhere (perfgate at the default and "
            f"calibrate's thresholds): {verdict} — {detail}."
        )
    return f"- For comparison, the --threshold rows (not a configuration anyone chose): {detail}."


def _detection_line(scenario: Scenario, counts: Counts, target: float, where: str) -> str:
    """Met when the default or calibrate's threshold reaches the target (``--threshold`` rows
    are shown for comparison but do not count: nobody would have configured them)."""
    parts = []
    met = False
    for i, (threshold, note) in enumerate(
        zip(scenario.thresholds, scenario.threshold_notes, strict=True)
    ):
        detected = rate(counts, perfgate_row(i), target)
        if detected is None:
            continue
        if note != "--threshold":
            met = met or detected >= DETECTION_TARGET
        parts.append(f"{detected:.1%} at threshold {threshold:.2%} ({note})")
    return (
        f"- Detection ≥ {DETECTION_TARGET:.0%} of {target:.0%} {where} "
        f"({scenario.title}, n = {scenario.repeats}): {'MET' if met else 'MISSED'} — "
        + "; ".join(parts)
    )


def _dominance(scenario: Scenario, counts: Counts, anchor: str) -> str:
    anchor_fp = rate(counts, anchor, 0.0)
    anchor_det = [rate(counts, anchor, d) for d in SLOWDOWNS]
    if anchor_fp is None:
        return "no A/A pairs (pool too small)"
    verdicts = []
    for i, (threshold, note) in enumerate(
        zip(scenario.thresholds, scenario.threshold_notes, strict=True)
    ):
        if note == "--threshold":
            continue
        fp = rate(counts, perfgate_row(i), 0.0)
        det = [rate(counts, perfgate_row(i), d) for d in SLOWDOWNS]
        if fp is None:
            continue
        fewer = fp < anchor_fp
        equal_fp = fp == anchor_fp
        shortfalls = [
            f"{d:.0%}: {p:.1%} vs {a:.1%}"
            for d, p, a in zip(SLOWDOWNS, det, anchor_det, strict=True)
            if p is not None and a is not None and p < a
        ]
        if (fewer or equal_fp) and not shortfalls:
            word = "better" if fewer else f"no more false alarms (both {fp:.1%})"
            verdicts.append(f"@{threshold:.2%} {word}, detection ≥ anchor's at 2/5/10 %")
        else:
            fp_text = f"FP {fp:.1%} vs {anchor_fp:.1%}"
            lost = f"; detects less at {', '.join(shortfalls)}" if shortfalls else ""
            verdicts.append(f"@{threshold:.2%} NOT better ({fp_text}{lost})")
    return " | ".join(verdicts)


@dataclass
class Context:
    """Figures the report states besides the table."""

    lines: list[str] = field(default_factory=list)


def perfgate_thresholds(
    sigma: float, repeats: int, extra: Sequence[float]
) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """The default threshold, calibrate's recommendation when it is a usable one, and any
    ``--threshold`` asked for (one bootstrap serves them all, so extra rows cost little)."""
    thresholds, notes = [DEFAULT_THRESHOLD], ["default"]
    recommended = recommended_threshold(sigma, repeats, repeats)
    if 0 < recommended < 1 and not math.isclose(recommended, DEFAULT_THRESHOLD, rel_tol=1e-3):
        thresholds.append(recommended)
        notes.append("calibrate's recommendation")
    for threshold in extra:
        thresholds.append(threshold)
        notes.append("--threshold")
    return tuple(thresholds), tuple(notes)


def simulated_scenarios(args: argparse.Namespace, context: Context) -> list[Scenario]:
    """(a): the quiet GPU at 5 repeats; this CPU at 5 and at calibrate's repeats for 10 %."""
    scenarios = []
    seed = args.seed
    gpu_sigma = model_sigma(GPU_QUIET, seed)
    cpu_sigma = model_sigma(THIS_CPU, seed)
    cpu_needed = repeats_needed(cpu_sigma, CPU_TARGET, DEFAULT_THRESHOLD)
    cpu_tuned = repeats_needed_tuned(cpu_sigma, CPU_TARGET)
    context.lines += [
        f"- **{GPU_QUIET.name}**: {GPU_QUIET.describe()}. Calibrate's σ (SD of log repeat "
        f"values, 2,000 simulated repeats) = {gpu_sigma:.2%}; at 5 repeats a side its "
        f"recommended threshold is {recommended_threshold(gpu_sigma, 5, 5):.2%}, and the "
        f"smallest change it detects with 95 % power is "
        f"{min_detectable(gpu_sigma, 5, 5, DEFAULT_THRESHOLD):.1%} at the 5 % threshold.",
        f"- **{THIS_CPU.name}**: {THIS_CPU.describe()}. Calibrate's σ = {cpu_sigma:.2%}; at 5 "
        f"repeats: smallest detectable {min_detectable(cpu_sigma, 5, 5, DEFAULT_THRESHOLD):.1%}"
        f", recommended threshold {recommended_threshold(cpu_sigma, 5, 5):.1%}. Repeats a side "
        f"calibrate says detect 10 %: {cpu_needed} at the 5 % threshold "
        f"(repeats_needed), {cpu_tuned} with the threshold tuned (repeats_needed_tuned).",
    ]
    for key, (model, sigma, kind) in enumerate(
        ((GPU_QUIET, gpu_sigma, "gpu"), (THIS_CPU, cpu_sigma, "cpu"))
    ):
        counts = [SMALL_REPEATS]
        if kind == "cpu" and cpu_needed is not None:
            counts.append(cpu_needed)
        for repeats in counts:
            if comparisons_for(repeats, args) == 0:
                continue
            thresholds, notes = perfgate_thresholds(sigma, repeats, args.threshold)
            scenarios.append(
                Scenario(
                    kind=kind,
                    title=model.name,
                    source=SimulatedPairs(model, repeats, seed, key * 1000 + repeats),
                    repeats=repeats,
                    comparisons=comparisons_for(repeats, args),
                    thresholds=thresholds,
                    threshold_notes=notes,
                )
            )
    return scenarios


def real_scenarios(pools: RealPools, args: argparse.Namespace, context: Context) -> list[Scenario]:
    """(b): the real pools at 5 repeats and at the most the pool allows toward calibrate's."""
    labels = {0.0: PLAIN} | {d: canary_label(d) for d in SLOWDOWNS}
    seed = args.seed
    rounds = pools.rounds
    plain = pools.values(PLAIN)
    sigma = noise_sigma(plain.tolist())
    needed = repeats_needed(sigma, CPU_TARGET, DEFAULT_THRESHOLD)
    tuned = repeats_needed_tuned(sigma, CPU_TARGET)
    noise = measured_noise(pools.arms[PLAIN][:rounds])
    meta = pools.meta
    loads = [r["load_1min"] for r in meta.get("load_per_round", [])]
    wall = noise["median_wall_s"]
    title = f"real {meta['workload']} on this CPU"
    if "window" in meta:
        first, last = meta["window"][0] + 1, meta["window"][0] + rounds
        title += f", rounds {first}–{last} only"
        context.lines.append(
            f"- **Window chosen after measuring**: only rounds {first}–{last} of the "
            f"{meta['rounds_requested']} measured are analysed (a stretch picked from the load "
            "record, not a random sample of the machine's states)."
        )
    context.lines += [
        f"- **{title}**: {rounds} interleaved rounds of {len(labels)} arms "
        f"({', '.join(labels.values())}), measured {meta['started_at']} in "
        f"{meta['wall_s']:.0f} s; settings {meta['settings']}; machine {meta['machine']}. "
        f"Load average (1 min) before {meta['load_before'][0]:.2f}, after "
        f"{meta['load_after'][0]:.2f}, per round min {min(loads, default=math.nan):.2f} / "
        f"median {_median(loads):.2f} / max {max(loads, default=math.nan):.2f} "
        f"on {meta['machine']['cpu_count']} CPUs.",
        "- Measured noise of the plain arm: "
        f"median step {noise['median_step_s'] * 1e3:.3f} ms; within a process robust σ "
        f"{noise['within_robust_sigma']:.1%} (plain CV {noise['within_cv']:.1%}) over "
        f"{noise['steady_steps_per_repeat']:.1f} steady steps; steps > 2× their repeat's median "
        f"{noise['stall_share_2x']:.2%} (> 4×: {noise['stall_share_4x']:.2%}); between "
        f"processes σ {noise['between_sigma']:.1%} (calibrate's noise_sigma; robust "
        f"{noise['between_robust_sigma']:.1%}); repeats > 15 % above the median "
        f"{noise['slow_repeat_share']:.0%}; wall time of one repeat (a process) median "
        f"{wall:.2f} s, mean {noise['mean_wall_s']:.2f} s.",
        "- Canaries as observed (median ratio to plain − 1): "
        + ", ".join(
            f"{canary_label(d)} {observed_slowdown(pools, canary_label(d), PLAIN):+.1%}"
            for d in SLOWDOWNS
        )
        + ".",
        f"- Calibrate on this pool: σ = {sigma:.1%}; at 5 repeats smallest detectable "
        f"{min_detectable(sigma, 5, 5, DEFAULT_THRESHOLD):.1%}, recommended threshold "
        f"{recommended_threshold(sigma, 5, 5):.1%}; repeats a side to detect 10 %: {needed} "
        f"at the 5 % threshold, {tuned} tuned. "
        + (
            f"An interleaved A/B of {needed} repeats a side takes ≈ "
            f"{2 * needed * wall / 60:.1f} min of wall time here ({2 * needed} processes × "
            f"{wall:.2f} s)."
            if needed
            else "No repeat count up to 200 a side reaches it."
        ),
    ]
    largest = rounds // 2
    counts = [SMALL_REPEATS]
    chosen = largest if needed is None else min(needed, largest)
    if chosen > SMALL_REPEATS:
        counts.append(chosen)
    if needed is None or needed > largest:
        wanted = "no count up to 200" if needed is None else f"{needed}"
        context.lines.append(
            f"- Calibrate asks for {wanted} repeats a side; the pool of {rounds} rounds allows "
            f"at most {largest} for A/A pairs (2n distinct plain repeats), so the real block "
            f"beyond 5 repeats uses {largest}. With 2n close to the pool size the subsampled "
            "pairs overlap heavily: those rates rest on fewer independent repeats than the "
            "pair count suggests."
        )
    scenarios = []
    for repeats in counts:
        if comparisons_for(repeats, args) == 0:
            continue
        thresholds, notes = perfgate_thresholds(sigma, repeats, args.threshold)
        scenarios.append(
            Scenario(
                kind="real",
                title=title,
                source=RealPairs.from_pools(pools, labels, repeats, seed, 100 + repeats),
                repeats=repeats,
                comparisons=comparisons_for(repeats, args),
                thresholds=thresholds,
                threshold_notes=notes,
            )
        )
    return scenarios


def comparisons_for(repeats: int, args: argparse.Namespace) -> int:
    """Pairs per condition: ``--comparisons`` up to :data:`LARGE_REPEATS` repeats a side,
    ``--large-comparisons`` beyond, where one perfgate comparison takes seconds."""
    return args.comparisons if repeats <= LARGE_REPEATS else args.large_comparisons


def _median(values: Sequence[float]) -> float:
    return float(sorted(values)[len(values) // 2]) if values else math.nan


def rule_lines() -> list[str]:
    return [
        f"- **perfgate**: {PERFGATE_DESCRIPTION}.",
        *(f"- **{rule.name}**: {rule.description}." for rule in ANCHORS.values()),
        "- **pyperf, every step pooled**: pyperf's test as pyperf is used — all values of all "
        "worker processes pooled into one sample (here: every measured step).",
    ]


def report(
    scenarios: Sequence[Scenario],
    results: Sequence[Counts],
    context: Context,
    command: str,
    elapsed_s: float,
) -> list[str]:
    """The whole markdown report (a formatter: returns lines, prints nothing)."""
    return [
        "# Gate power: perfgate against asv, pyperf and a fixed 7 %",
        "",
        f"`{command}` — analysis {elapsed_s:.0f} s; perfgate's rule from "
        f"perfgate/stats/compare.py {RULE_DIGESTS['compare']}, calibrate's model from "
        f"perfgate/stats/power.py {RULE_DIGESTS['power']} (SHA-256 prefixes of the sources "
        "as loaded: both modules change, and the table belongs to these versions).",
        "",
        "## Rules",
        "",
        *rule_lines(),
        "",
        "## Scenarios",
        "",
        *context.lines,
        "",
        "## Results",
        "",
        *table_lines(scenarios, results),
        "",
        "## Targets",
        "",
        *target_lines(scenarios, results),
        "",
    ]


def source_digest(module: str) -> str:
    """Short SHA-256 of a perfgate.stats module's source, so a table names the rule it ran.

    Taken when this script loads the module (below), not when the report is written: the file
    may be edited while a long run is under way, and the table belongs to what was loaded."""
    spec = importlib.util.find_spec(f"perfgate.stats.{module}")
    if spec is None or spec.origin is None:
        return "(source not found)"
    return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()[:12]


RULE_DIGESTS = {module: source_digest(module) for module in ("compare", "power")}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--comparisons", type=int, default=None, help="pairs per cell at 5 repeats (1000)"
    )
    parser.add_argument(
        "--large-comparisons",
        type=int,
        default=None,
        help=f"pairs per cell beyond {LARGE_REPEATS} repeats a side (default: --comparisons)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="200 pairs (10 for large n), 12 rounds"
    )
    parser.add_argument("--simulate-only", action="store_true", help="skip the real part (b)")
    parser.add_argument("--real-only", action="store_true", help="skip the simulations (a)")
    parser.add_argument("--pools", type=Path, default=Path(".perfgate/gate_power_pools.json"))
    parser.add_argument("--measure", action="store_true", help="re-measure even if cached")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (40)")
    parser.add_argument(
        "--round-window",
        default=None,
        help="analyse only rounds START:STOP (0-based, Python slice) of the pools, e.g. one "
        "stretch of steady load; the report says the window was chosen",
    )
    parser.add_argument("--workload", default="mlp@smoke")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    parser.add_argument(
        "--threshold",
        type=float,
        action="append",
        default=[],
        help="also run perfgate at this threshold (a fraction, e.g. 0.01; repeatable)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.comparisons is None:
        args.comparisons = 200 if args.quick else 1000
    if not all(0 < t < 1 for t in args.threshold):
        parser.error("--threshold takes a fraction in (0, 1), e.g. 0.01 for 1 %")
    if args.large_comparisons is None:
        args.large_comparisons = 10 if args.quick else args.comparisons
    if args.rounds is None:
        args.rounds = 12 if args.quick else 40
    return args


def build_scenarios(args: argparse.Namespace, context: Context) -> list[Scenario]:
    """The simulated scenarios, and the real ones unless ``--simulate-only``."""
    scenarios = [] if args.real_only else simulated_scenarios(args, context)
    if args.simulate_only:
        return scenarios
    if args.measure or not args.pools.is_file():
        print(
            f"measuring {args.workload}: {args.rounds} rounds × {1 + len(SLOWDOWNS)} arms",
            flush=True,
        )
        pools = measure_pools(args.workload, SLOWDOWNS, args.rounds, args.threads, args.seed)
        save_pools(args.pools, pools)
        print(f"pools saved to {args.pools}", flush=True)
    else:
        pools = load_pools(args.pools)
        print(f"using cached pools {args.pools} (--measure to re-measure)", flush=True)
    if args.round_window:
        start, _, stop = args.round_window.partition(":")
        pools = pools.window(int(start or 0), int(stop or pools.rounds))
    return scenarios + real_scenarios(pools, args, context)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    context = Context()
    scenarios = build_scenarios(args, context)
    started = time.monotonic()
    results = evaluate(scenarios, args.jobs)
    command = " ".join(["python benchmarks/gate_power.py", *(argv or sys.argv[1:])])
    lines = report(scenarios, results, context, command, time.monotonic() - started)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
