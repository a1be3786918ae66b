"""The gate: head workloads against their baselines, every metric, one corrected verdict.

Overall verdict and exit code: any regression or loss mismatch → ``regression`` (1); otherwise
any inconclusive metric → ``inconclusive`` (4, or pass/fail by flag); otherwise ``pass`` (0).
A head workload that failed is an infrastructure error (3), never a regression.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from perfgate.compare.baseline_source import BaselineWorkload, conditions_of, throttled_share
from perfgate.compare.conditions import condition_blocks
from perfgate.compare.work import work_changes
from perfgate.documents.result import RunResult, WorkloadResult
from perfgate.documents.verdict import CompareVerdict, MetricComparison, Overall, WorkloadVerdict
from perfgate.errors import InfrastructureError, UsageError, last_line
from perfgate.metrics import METRICS, metric_values
from perfgate.stats.compare import compare_metric, correct
from perfgate.telemetry.fingerprint import fingerprint_differences, fingerprint_notes
from perfgate.thresholds import Thresholds, losses_match


def compare_runs(
    head: RunResult,
    baselines: dict[str, BaselineWorkload],
    *,
    allow_env_drift: bool = False,
    thresholds: Thresholds | None = None,
    method: Literal["baseline", "interleaved"] = "baseline",
    require_baseline: bool = True,
) -> CompareVerdict:
    """Judge every head workload against its baseline (BH-corrected across the tested metrics;
    each comparison's bootstrap seeded from the two sides' identities).

    With no baseline for any workload this is an infrastructure error, unless
    ``require_baseline`` is off: then the verdict lists them as ``no_baseline`` for an
    interleaved A/B to judge (``compare --confirm``: the first pull request of a project).
    """
    thresholds = thresholds or Thresholds()
    failed = [w for w in head.workloads if w.status != "ok"]
    if failed:
        names = "; ".join(f"{w.name} ({w.status}: {last_line(w.error)})" for w in failed)
        raise InfrastructureError(
            f"head workloads did not run: {names}", "fix or re-run them; nothing was compared"
        )
    differences = _environment_differences(head, baselines)
    if differences and not allow_env_drift:
        raise UsageError(
            f"the head ran on a different environment than the baseline ({'; '.join(differences)})",
            "compare on the same machine type, or pass --allow-env-drift",
        )
    compared = [
        _compare_workload(w, baselines.get(w.name), thresholds, head.run_id) for w in head.workloads
    ]
    if require_baseline and all(v.status == "no_baseline" for v in compared):
        raise InfrastructureError(
            "no baseline for any head workload",
            "refresh and export baselines, pass --baseline, or let --confirm measure the base "
            "ref against the head",
        )
    canary = bool(head.settings.inject_slowdown)
    corrected = [
        _unless_disturbed(v, w, baselines.get(w.name), thresholds, canary)
        for v, w in zip(_corrected(compared), head.workloads, strict=True)
    ]
    return CompareVerdict(
        overall=overall_verdict(corrected),
        head_run_id=head.run_id,
        head_commit=head.source.commit,
        head_subject=head.source.subject,
        workloads=corrected,
        environment_differences=differences,
        method=method,
        notes=[
            f"environment differs, not a reason to refuse the comparison: {line}"
            for line in _environment_differences(head, baselines, fingerprint_notes)
        ],
    )


def _compare_workload(
    workload: WorkloadResult,
    baseline: BaselineWorkload | None,
    thresholds: Thresholds,
    head_run_id: str,
) -> WorkloadVerdict:
    if baseline is None:
        return WorkloadVerdict(name=workload.name, status="no_baseline")
    notes = distributed_notes(workload)
    if baseline.definition_hash != workload.definition_hash:
        notes.append("the workload definition differs from the baseline's (code or knobs changed)")
    head_metrics = metric_values(workload)
    plan = metric_plan(baseline.metrics, head_metrics)
    notes.extend(plan.notes)

    def judged(metric: str, seed_metric: str) -> MetricComparison:
        return compare_metric(
            metric,
            baseline.metrics[metric],
            head_metrics[metric],
            direction=METRICS[metric].direction,
            threshold=thresholds.threshold(workload.name, metric),
            baseline_throttled=baseline.throttled_share,
            head_throttled=throttled_share(workload),
            seed=comparison_seed(baseline.identity, head_run_id, workload.name, seed_metric),
        )

    comparisons = [judged(metric, metric) for metric in plan.tested]
    comparisons += [
        replace(judged(metric, plan.primary), derived_from=plan.primary) for metric in plan.derived
    ]
    status: Literal["compared", "loss_mismatch"] = "compared"
    head_loss = workload.summary.final_loss if workload.summary else None
    if losses_match(baseline.final_loss, head_loss) is False:
        status = "loss_mismatch"
        notes.append(
            f"final loss {head_loss:.6g} differs from the baseline's {baseline.final_loss:.6g}"
        )
    return WorkloadVerdict(
        name=workload.name,
        status=status,
        baseline_origin=baseline.origin,
        comparisons=comparisons,
        notes=notes,
        work_changes=work_changes(baseline.work, workload.work),
    )


def _unless_disturbed(
    verdict: WorkloadVerdict,
    workload: WorkloadResult,
    baseline: BaselineWorkload | None,
    thresholds: Thresholds,
    head_canary: bool,
) -> WorkloadVerdict:
    """The verdict, with its timing metrics made inconclusive when the two sides cannot be
    compared fairly: a canary side, or measurement conditions that differ
    (``perfgate.compare.conditions``). Peak memory does not depend on the neighbours."""
    if baseline is None:
        return verdict
    blocks, notes = condition_blocks(
        baseline.conditions,
        conditions_of(workload),
        thresholds.threshold(workload.name, "step_time_s"),
        baseline_canary=baseline.canary,
        head_canary=head_canary,
    )
    if not blocks:
        return replace(verdict, notes=[*verdict.notes, *notes])
    comparisons = [
        replace(c, verdict="inconclusive", reasons=(*blocks, *c.reasons))
        if c.metric in TIMING and c.verdict != "inconclusive"
        else c
        for c in verdict.comparisons
    ]
    return replace(verdict, comparisons=comparisons, notes=[*verdict.notes, *notes])


def comparison_seed(baseline_identity: str, head_identity: str, workload: str, metric: str) -> int:
    """The bootstrap's seed for one comparison, derived from what is compared.

    The same two runs give the same verdict every time, but no single resampling plan is
    shared by every comparison (one fixed seed made some plans decide more often than others
    across thousands of pairs). The two identities are sorted, so swapping the sides keeps the
    seed and the verdict stays exactly mirrored.
    """
    first, second = sorted((baseline_identity, head_identity))
    text = "\x1f".join((first, second, workload, metric))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def distributed_notes(workload: WorkloadResult) -> list[str]:
    """For a distributed workload: which rank's step is judged, and how far the others were."""
    summary = workload.summary
    if summary is None or summary.world_size is None:
        return []
    spread = f", rank spread {summary.rank_spread:.1%}" if summary.rank_spread is not None else ""
    exposed = summary.communication_exposed_share
    talk = f", {exposed:.1%} of the step exposed communication" if exposed is not None else ""
    return [f"{summary.world_size} ranks: judged on the slowest rank's step{spread}{talk}"]


WORK_PER_STEP = (
    ("samples", "samples_per_s", 1.0, ("step_time_s",)),
    ("FLOPs", "tflops", 1e12, ("tflops", "mfu")),
)
"""Work done per step, recovered as rate × step time, and the metrics that assume it is
unchanged: a bigger batch makes the step legitimately slower (judge throughput instead), and
a step that does more FLOPs raises TFLOP/s without being faster (judge time instead)."""

RATES_OF_TIME = ("samples_per_s", "tokens_per_s", "tflops", "mfu")
"""Metrics computed from each repeat's step time at a fixed amount of work per step."""
TIMING = ("step_time_s", *RATES_OF_TIME)
"""Metrics that move with the machine's load, clocks and neighbours."""
INDEPENDENT = ("peak_memory_bytes",)
"""Metrics measured on their own, tested beside the primary one."""


@dataclass(frozen=True, kw_only=True)
class MetricPlan:
    """Which metrics of a workload are tested, and which are shown beside the one they come
    from. Step time is the primary timing metric; samples/s, tokens/s, TFLOP/s and MFU are the
    same numbers divided into a fixed amount of work, so testing them again would count one
    measurement several times (and a bimodal step time would get several chances to look
    inconclusive). When the samples per step changed, time per sample (samples/s) is primary."""

    primary: str
    tested: tuple[str, ...]
    """The primary metric first, then the independent ones."""
    derived: tuple[str, ...]
    notes: tuple[str, ...] = ()


def metric_plan(
    baseline: Mapping[str, Sequence[float]], head: Mapping[str, Sequence[float]]
) -> MetricPlan:
    """The plan for the metrics both sides have; work-per-step changes are noted."""
    notes: list[str] = []
    dropped = set(_incomparable(baseline, head, notes))
    present = [m for m in METRICS if baseline.get(m) and head.get(m) and m not in dropped]
    timing = [m for m in ("step_time_s", *RATES_OF_TIME) if m in present]
    primary = timing[0] if timing else None
    tested = [primary] if primary else []
    tested += [m for m in INDEPENDENT if m in present]
    derived = tuple(m for m in timing[1:])
    return MetricPlan(
        primary=primary or "step_time_s",
        tested=tuple(tested),
        derived=derived,
        notes=tuple(notes),
    )


def _incomparable(
    baseline: Mapping[str, Sequence[float]], head: Mapping[str, Sequence[float]], notes: list[str]
) -> list[str]:
    """Metrics that must not be compared because the work per step changed (noted)."""
    dropped: list[str] = []
    for what, rate, unit, affected in WORK_PER_STEP:
        before, after = _work_per_step(baseline, rate, unit), _work_per_step(head, rate, unit)
        if before is None or after is None or math.isclose(before, after, rel_tol=0.01):
            continue
        names = [m for m in affected if m in head]
        dropped.extend(names)
        notes.append(
            f"{what} per step changed from {before:.4g} to {after:.4g}, so "
            f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} not compared"
        )
    return dropped


def _work_per_step(metrics: Mapping[str, Sequence[float]], rate: str, unit: float) -> float | None:
    rates, times = metrics.get(rate), metrics.get("step_time_s")
    if not rates or not times or len(rates) != len(times):
        return None
    return unit * statistics.median(r * t for r, t in zip(rates, times, strict=True))


def _corrected(verdicts: list[WorkloadVerdict]) -> list[WorkloadVerdict]:
    """Benjamini–Hochberg over every tested metric of every workload, then absolute
    tolerances; a derived metric takes the verdict of the metric it comes from."""
    tested = [c for v in verdicts for c in v.comparisons if c.derived_from is None]
    corrected = iter(apply_tolerances(correct(tested)))
    result = []
    for verdict in verdicts:
        own = [next(corrected) for c in verdict.comparisons if c.derived_from is None]
        derived = [c for c in verdict.comparisons if c.derived_from is not None]
        result.append(replace(verdict, comparisons=with_derived_verdicts(own, derived)))
    return result


def with_derived_verdicts(
    tested: list[MetricComparison], derived: list[MetricComparison]
) -> list[MetricComparison]:
    """The tested comparisons, then each derived one carrying its source's final verdict."""
    final = {c.metric: c for c in tested}
    shown = []
    for comparison in derived:
        source = final[comparison.derived_from or ""]
        shown.append(
            replace(
                comparison,
                verdict=source.verdict,
                p_adjusted=source.p_adjusted,
                reasons=(f"{source.metric} at the same work per step; not tested again",),
            )
        )
    return [*tested, *shown]


def _within_tolerance(metric: str, change: float, tolerance: float) -> str:
    """Why a change is no change, in the metric's unit (memory in MiB, not 8.19e+03 bytes)."""
    if metric.endswith("_bytes"):
        return (
            f"a change of {change / 2**20:.2f} MiB, within the absolute tolerance of "
            f"{tolerance / 2**20:.0f} MiB"
        )
    return f"a change of {change:.3g}, within the absolute tolerance of {tolerance:.3g}"


def apply_tolerances(comparisons: list[MetricComparison]) -> list[MetricComparison]:
    """A change within the metric's absolute tolerance (peak memory: 16 MiB) is no change."""
    adjusted = []
    for comparison in comparisons:
        tolerance = METRICS[comparison.metric].absolute_tolerance
        change = abs(comparison.head_median - comparison.baseline_median)
        if tolerance and change <= tolerance and comparison.verdict != "no_change":
            comparison = replace(
                comparison,
                verdict="no_change",
                reasons=(
                    *comparison.reasons,
                    _within_tolerance(comparison.metric, change, tolerance),
                ),
            )
        adjusted.append(comparison)
    return adjusted


def overall_verdict(verdicts: list[WorkloadVerdict]) -> Overall:
    """Any regression, loss mismatch or gated workload missing at head wins, then any
    inconclusive metric or unjudged changed definition, else pass."""
    metric_verdicts = {c.verdict for v in verdicts for c in v.comparisons}
    statuses = {v.status for v in verdicts}
    if "regression" in metric_verdicts or statuses & {"loss_mismatch", "missing"}:
        return "regression"
    if "inconclusive" in metric_verdicts or "definition_changed" in statuses:
        return "inconclusive"
    return "pass"


def _environment_differences(
    head: RunResult,
    baselines: dict[str, BaselineWorkload],
    describe: Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]] = (
        fingerprint_differences
    ),
) -> list[str]:
    """``describe``'s lines (baseline → head) over every baseline, each once: the key fields
    by default, or ``fingerprint_notes`` for the facts shown without refusing the comparison."""
    differences: list[str] = []
    for baseline in baselines.values():
        if baseline.environment:
            for line in describe(baseline.environment, head.environment):
                if line not in differences:
                    differences.append(line)
    return differences
