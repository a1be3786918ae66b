"""The verdict of an interleaved A/B, measured sequentially: after every round the repeated
confidence interval of each workload is updated, and the workload stops as soon as it decides.

This is the pull request's verdict (``compare --ab``, ``--confirm``, the PR gate): base and head
measured alternately on the same machine in the same minutes, paired round by round, so drift
of the machine lands on both sides and cancels. The statistics are
``perfgate.stats.sequential`` (repeated confidence intervals with alpha spending);
this module turns the interleaved runner's repeats into its inputs and its states into the
verdict document's comparisons.

- The primary metric is step time (time per sample when a change altered the samples per step);
  its decision drives the stopping. The rates computed from it at fixed work (samples/s,
  tokens/s, TFLOP/s, MFU) are shown beside it with the same interval, never tested again.
- Peak memory, measured on its own, is judged at the end by the fixed-size test
  (``perfgate.stats.compare``) on the rounds measured.
- With several workloads the error rate is divided among them (Bonferroni), which holds under
  optional stopping whatever their correlation.
- The budget: at most ``max_rounds`` rounds a workload (the design's horizon) and a wall-time
  budget shared among the workloads still to run; defaults for a CPU and a GPU runner below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from perfgate.compare.baseline_source import throttled_share
from perfgate.compare.gate import (
    apply_tolerances,
    comparison_seed,
    distributed_notes,
    metric_plan,
    overall_verdict,
    with_derived_verdicts,
)
from perfgate.compare.work import work_changes
from perfgate.config import Config
from perfgate.documents.result import RunResult, WorkloadResult
from perfgate.documents.verdict import CompareVerdict, MetricComparison, WorkloadVerdict
from perfgate.errors import UsageError
from perfgate.metrics import METRICS, metric_values, steady_median
from perfgate.runner.interleave import MIN_ROUNDS, ArmRounds, RoundReading
from perfgate.stats.compare import compare_metric, correct
from perfgate.stats.sequential import (
    DEFAULT_ALPHA,
    SequentialDesign,
    sequential_comparison,
    sequential_design,
    sequential_state,
)
from perfgate.thresholds import Thresholds, losses_match

DEFAULT_MAX_ROUNDS = {"cpu": 200, "cuda": 40}
"""The horizon of the sequential design: at most this many rounds a workload. On the 2-core CI
CPU the paired noise of a round (log ratio of two back-to-back processes) is 12–18 % — memory
layout and the neighbours move a process's median step by ±10 % — so telling +10 % from a 5 %
band takes about 80 rounds (simulated at 15 %: 99 % caught within 200, median 83 rounds; +25 %
decided in a median 18; A/A no change in a median 103), affordable because a forked round costs
about a second. A GPU step is quieter (paired noise ~1 %: decided within a few rounds) and a
fresh CUDA worker dearer."""
MAX_ROUNDS = 1000
"""The most rounds an A/B may be given: about a quarter of an hour per workload on a CPU, and
the design's tables already take seconds to compute (10000 rounds fail in NumPy after minutes):
more is a typo."""
DEFAULT_BUDGET_S = {"cpu": 900.0, "cuda": 900.0}
"""Wall-time budget of one A/B (all workloads): the job's patience, not the statistics'."""


@dataclass(frozen=True, kw_only=True)
class ABBudget:
    """How much an interleaved A/B may measure."""

    max_rounds: int
    """Rounds a workload gets at most (the sequential design's horizon)."""
    budget_s: float | None
    """Wall-time budget of the whole A/B; None: rounds only."""


def ab_budget(
    config: Config,
    device: str,
    *,
    rounds: int | None = None,
    budget_s: float | None = None,
) -> ABBudget:
    """Flags over configuration over the device's defaults."""
    kind = "cuda" if device == "cuda" else "cpu"
    most = rounds if rounds is not None else config.ab_rounds
    seconds = budget_s if budget_s is not None else config.confirm_budget_s
    budget = ABBudget(
        max_rounds=most if most is not None else DEFAULT_MAX_ROUNDS[kind],
        budget_s=seconds if seconds is not None else DEFAULT_BUDGET_S[kind],
    )
    if budget.max_rounds < MIN_ROUNDS:
        raise UsageError(
            f"{budget.max_rounds} interleaved rounds can never show a significant change",
            f"allow at least {MIN_ROUNDS} rounds (--rounds, or ab_rounds in config)",
        )
    if budget.max_rounds > MAX_ROUNDS:
        raise UsageError(
            f"{budget.max_rounds} interleaved rounds are more than the {MAX_ROUNDS} allowed",
            f"allow at most {MAX_ROUNDS} rounds (--rounds, or ab_rounds in config)",
        )
    if budget.budget_s is not None and not (math.isfinite(budget.budget_s) and budget.budget_s > 0):
        raise UsageError(
            f"A/B budget {budget.budget_s!r} s is not a positive number of seconds",
            "give e.g. --budget 900",
        )
    return budget


def design_for(workloads: int, max_rounds: int) -> SequentialDesign:
    """The design of each of ``workloads`` comparisons: the error rate split among them."""
    return sequential_design(max_rounds, alpha=DEFAULT_ALPHA / max(workloads, 1))


class SequentialJudge:
    """The interleaved runner's judge (``perfgate.runner.interleave.RoundJudge``): after each
    round, the primary metric's repeated interval and whether it has decided."""

    def __init__(self, thresholds: Thresholds, workloads: int, max_rounds: int) -> None:
        self._thresholds = thresholds
        self._design = design_for(workloads, max_rounds)

    def judge_round(self, workload: str, arms: Sequence[ArmRounds], final: bool) -> RoundReading:
        base, head = arms[0], arms[1]
        per_sample = _per_sample(base.samples_per_step, head.samples_per_step)
        metric = "samples_per_s" if per_sample else "step_time_s"
        base_values, head_values = _round_values(base, per_sample), _round_values(head, per_sample)
        rounds = min(len(base_values), len(head_values))
        logs = [
            math.log(h / b) for b, h in zip(base_values[:rounds], head_values[:rounds], strict=True)
        ]
        threshold = self._thresholds.threshold(workload, metric)
        state = sequential_state(logs, threshold, self._design, final=final)
        if state.verdict == "continue" and final:
            state = replace(state, verdict="inconclusive")
        interval = (
            f"{math.exp(state.estimate):.3f}× "
            f"({math.exp(state.low):.3f}–{math.exp(state.high):.3f})"
            if math.isfinite(state.low)
            else "no interval yet"
        )
        word = {"continue": "measuring on", "no_change": "no change"}.get(
            state.verdict, state.verdict
        )
        return RoundReading(
            decided=state.verdict in ("regression", "improvement", "no_change"),
            summary=f"{workload}: round {rounds}, head/base {interval} · {word}",
        )


def judge_interleaved(
    base: RunResult,
    head: RunResult,
    thresholds: Thresholds,
    max_rounds: int,
) -> CompareVerdict:
    """The verdict of an interleaved pair: per workload, the sequential comparison of the
    primary metric at the round it stopped, its rates beside it, peak memory by the fixed test."""
    base_by_name = {w.name: w for w in base.workloads}
    pairs = [(base_by_name[w.name], w) for w in head.workloads if w.name in base_by_name]
    design = design_for(len(pairs), max_rounds)
    identities = (base.run_id, head.run_id)
    verdicts = [_judge_workload(b, h, thresholds, design, identities) for b, h in pairs]
    # Peak memory (the independent metrics) corrected together, Benjamini–Hochberg, then the
    # absolute tolerance, as for a stored baseline.
    fixed = iter(
        apply_tolerances(
            correct([c for v in verdicts for c in v.comparisons if c.method == "bootstrap"])
        )
    )
    verdicts = [
        replace(
            v,
            comparisons=[c if c.method == "sequential" else next(fixed) for c in v.comparisons],
        )
        for v in verdicts
    ]
    return CompareVerdict(
        overall=overall_verdict(verdicts),
        head_run_id=head.run_id,
        head_commit=head.source.commit,
        head_subject=head.source.subject,
        base_commit=base.source.commit,
        workloads=verdicts,
        environment_differences=[],
        method="interleaved",
    )


def _judge_workload(
    base: WorkloadResult,
    head: WorkloadResult,
    thresholds: Thresholds,
    design: SequentialDesign,
    identities: tuple[str, str],
) -> WorkloadVerdict:
    notes = distributed_notes(head)
    if base.definition_hash != head.definition_hash:
        notes.append("the workload definition differs from the base's (code or knobs changed)")
    base_metrics, head_metrics = _paired_metrics(base, head)
    plan = metric_plan(base_metrics, head_metrics)
    notes.extend(plan.notes)
    comparisons: list[MetricComparison] = []
    primary: MetricComparison | None = None
    for metric in plan.tested:
        threshold = thresholds.threshold(head.name, metric)
        if metric == plan.primary:
            primary = sequential_comparison(
                metric,
                base_metrics[metric],
                head_metrics[metric],
                direction=METRICS[metric].direction,
                threshold=threshold,
                design=design,
                baseline_throttled=throttled_share(base),
                head_throttled=throttled_share(head),
            )
            comparisons.append(primary)
        else:
            comparisons.append(
                compare_metric(
                    metric,
                    base_metrics[metric],
                    head_metrics[metric],
                    direction=METRICS[metric].direction,
                    threshold=threshold,
                    seed=comparison_seed(*identities, head.name, metric),
                )
            )
    if primary is not None:
        derived = [
            _derived(primary, metric, base_metrics[metric], head_metrics[metric])
            for metric in plan.derived
        ]
        comparisons = with_derived_verdicts(comparisons, derived)
    status: Literal["compared", "loss_mismatch"] = "compared"
    base_loss = base.summary.final_loss if base.summary else None
    head_loss = head.summary.final_loss if head.summary else None
    if losses_match(base_loss, head_loss) is False:
        status = "loss_mismatch"
        notes.append(f"final loss {head_loss:.6g} differs from the base's {base_loss:.6g}")
    return WorkloadVerdict(
        name=head.name,
        status=status,
        comparisons=comparisons,
        notes=notes,
        work_changes=work_changes(base.work, head.work),
    )


def _paired_metrics(
    base: WorkloadResult, head: WorkloadResult
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Both sides' per-repeat metrics cut to the rounds both completed (round i pairs base
    repeat i with head repeat i)."""
    base_metrics, head_metrics = metric_values(base), metric_values(head)
    rounds = min(len(base_metrics.get("step_time_s", [])), len(head_metrics.get("step_time_s", [])))
    return (
        {m: v[:rounds] for m, v in base_metrics.items() if len(v) >= rounds},
        {m: v[:rounds] for m, v in head_metrics.items() if len(v) >= rounds},
    )


def _derived(
    primary: MetricComparison, metric: str, base: Sequence[float], head: Sequence[float]
) -> MetricComparison:
    """A rate of the primary metric: its medians and values, the primary's interval."""
    return replace(
        primary,
        metric=metric,
        direction=METRICS[metric].direction,
        baseline_median=_median(base),
        head_median=_median(head),
        baseline_values=tuple(sorted(base)),
        head_values=tuple(sorted(head)),
        derived_from=primary.metric,
    )


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _per_sample(base: int | None, head: int | None) -> bool:
    """Whether the sides do different work per step, so time per sample is what compares."""
    return bool(base and head and base != head)


def _round_values(arm: ArmRounds, per_sample: bool) -> list[float]:
    values = [
        steady_median(r)
        for r in arm.repeats
        if r.status == "ok" and r.step_times_s[r.steady_start :]
    ]
    if per_sample and arm.samples_per_step:
        return [v / arm.samples_per_step for v in values]
    return values
