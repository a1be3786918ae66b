"""Proof of advice: re-run the workload with the advice's knob changes, interleaved A/B against
the unchanged workload, and attach the measured speed-up.

An advisor's estimate is a model; users were burned by advice that was wrong for their
hardware. So each piece of advice that names knobs is measured here, on this machine: the
unchanged workload and the changed one alternate round by round (see
:mod:`perfgate.runner.interleave`), the step-time comparison is the gate's own
(:func:`perfgate.stats.compare.compare_metric`), and the advice becomes

- **verified** when the changed workload is faster beyond the practical threshold with a
  significant test (the gate's "improvement");
- **refuted** when the interval shows no gain beyond the threshold or a slowdown (the gate's
  "no change" or "regression"), or allows no gain beyond it (an inconclusive interval whose
  upper end is within the band: no gain or slower, the advice does not pay either way): it
  ranks last, with its number;
- **unverifiable** when it names no knob, or a knob the workload does not honour;
- left **unverified** when the measurement is inconclusive (shown as *inconclusive* with its
  interval, ranked after the advice not measured) or failed (shown as *failed*, with why).

Loss parity is reported beside the speed-up: a knob that changes the maths (lower precision)
may be fast and still not be what the user wants.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfgate.advise.ranking import Advice, rank, with_status
from perfgate.config import Config
from perfgate.documents.advice import Outcome, Verification
from perfgate.documents.result import WorkloadResult
from perfgate.documents.verdict import MetricComparison
from perfgate.errors import UsageError
from perfgate.metrics import metric_values
from perfgate.runner.interleave import Arm, InterleaveObserver, run_interleaved
from perfgate.runner.plan import Selection, available_workloads, prepare
from perfgate.stats.compare import compare_metric, correct
from perfgate.thresholds import losses_match
from perfgate.workloads.protocol import KnobValue

VERIFY_THRESHOLD = 0.02
"""A fix must save more than 2 % of the step, beyond doubt, to count as verified: smaller
gains are not worth a change, and on a noisy runner they cannot be told from nothing."""

_OUTCOMES: dict[str, Outcome] = {
    "improvement": "verified",
    "no_change": "refuted",
    "regression": "refuted",
    "inconclusive": "inconclusive",
}


@dataclass(frozen=True, kw_only=True)
class WorkloadUnderTest:
    """The workload as the evidence run measured it: name, preset and knob values."""

    name: str
    preset: str
    knobs: Mapping[str, KnobValue]


def verify_advice(
    config: Config,
    target: WorkloadUnderTest,
    advice: Sequence[Advice],
    base: Selection,
    *,
    device: str,
    environment: dict[str, Any],
    rounds: int,
    observer: InterleaveObserver | None = None,
    binding: Iterable[str] = (),
) -> tuple[list[Advice], list[Verification]]:
    """Measure every piece of advice that names knobs; re-ranked advice and the measurements.

    ``base`` carries the measurement settings (steps, warm-up, threads, seed); its workload
    selection is replaced by ``target``. ``binding``: the categories ranked first (see
    ``perfgate.advise.ranking.rank``).
    """
    definition = available_workloads(config, [target.name])[target.name]
    verified: list[Advice] = []
    measurements: list[Verification] = []
    for item in advice:
        unsupported = sorted(set(item.verify_knobs) - set(definition.knobs))
        if not item.verify_knobs or unsupported:
            reason = (
                "the advice names no knob to change"
                if not item.verify_knobs
                else f"workload {target.name} has no knob {', '.join(unsupported)}"
            )
            measurements.append(_unmeasured(item, target, "unverifiable", reason))
            verified.append(with_status(item, "unverifiable"))
            continue
        changed = {**target.knobs, **item.verify_knobs}
        if all(target.knobs.get(k) == v for k, v in item.verify_knobs.items()):
            measurements.append(
                _unmeasured(item, target, "unverifiable", "the workload already runs so")
            )
            verified.append(with_status(item, "unverifiable"))
            continue
        measurement = _measure(
            config, target, changed, item, base, device, environment, rounds, observer
        )
        measurements.append(measurement)
        verified.append(_with_outcome(item, measurement))
    proofs = {measurement.rule_id: measurement for measurement in measurements}
    return rank(verified, binding, proofs), measurements


def _measure(
    config: Config,
    target: WorkloadUnderTest,
    changed: Mapping[str, KnobValue],
    item: Advice,
    base: Selection,
    device: str,
    environment: dict[str, Any],
    rounds: int,
    observer: InterleaveObserver | None,
) -> Verification:
    arms = []
    for label, knobs in (("unchanged", target.knobs), ("changed", changed)):
        selection = replace(
            base,
            suite=None,
            workloads=[f"{target.name}@{target.preset}"],
            preset=None,
            knobs=[_assignment(target.name, key, value) for key, value in knobs.items()],
            repeats=rounds,
        )
        plan, settings = prepare(config, selection)
        arms.append(Arm(label=label, plan=plan, settings=settings))
    (before,), (after,) = run_interleaved(
        arms, device, environment, rounds=rounds, observer=observer
    )
    return _judge(item, target, changed, before, after)


def _judge(
    item: Advice,
    target: WorkloadUnderTest,
    knobs: Mapping[str, KnobValue],
    before: WorkloadResult,
    after: WorkloadResult,
) -> Verification:
    changed_knobs = {k: v for k, v in knobs.items() if target.knobs.get(k) != v}
    failed = next((w for w in (before, after) if w.status != "ok"), None)
    if failed is not None:
        side = "unchanged" if failed is before else "changed"
        return _unmeasured(
            item,
            target,
            "failed",
            f"the {side} workload did not run ({failed.status}: {failed.error})",
            knobs=changed_knobs,
        )
    per_sample = before.samples_per_step != after.samples_per_step
    base_steps = _time_per_unit(before, per_sample)
    new_steps = _time_per_unit(after, per_sample)
    (comparison,) = correct(
        [
            compare_metric(
                "step_time_s",
                base_steps,
                new_steps,
                direction="lower",
                threshold=VERIFY_THRESHOLD,
            )
        ]
    )
    outcome, reason = measured_outcome(comparison, per_sample)
    speedup = 1 / comparison.ratio
    return Verification(
        rule_id=item.rule_id,
        workload=target.name,
        knobs=changed_knobs,
        outcome=outcome,
        reason=reason,
        rounds=min(len(base_steps), len(new_steps)),
        speedup=speedup,
        speedup_ci=(1 / comparison.ci_high, 1 / comparison.ci_low),
        p_value=comparison.p_adjusted,
        baseline_step_s=comparison.baseline_median,
        changed_step_s=comparison.head_median,
        per_sample=per_sample,
        loss_parity=_loss_parity(before, after),
    )


def measured_outcome(comparison: MetricComparison, per_sample: bool) -> tuple[Outcome, str]:
    """What the step-time comparison of unchanged against changed says of the advice, and
    why, with the measured speed-up and its interval."""
    outcome = _OUTCOMES[comparison.verdict]
    speedup = 1 / comparison.ratio
    best = 1 / comparison.ci_low
    """The most the interval allows the change to gain."""
    if outcome == "inconclusive" and best <= 1 + VERIFY_THRESHOLD:
        # Undecided between "no gain" and "slower": either way the advice does not pay.
        outcome = "refuted"
    unit = " per sample" if per_sample else ""
    interval = f"{speedup:.2f}×{unit} ({1 / comparison.ci_high:.2f}–{best:.2f})"
    if outcome == "verified":
        return outcome, f"{speedup:.2f}× faster{unit}, beyond the ±{VERIFY_THRESHOLD:.0%} band"
    if outcome == "refuted":
        # An interval inside the band is "no gain", whichever side of 1 it leans to.
        slower = comparison.verdict == "regression" or (
            comparison.verdict == "inconclusive" and best < 1
        )
        why = "slower with the change" if slower else f"no gain beyond ±{VERIFY_THRESHOLD:.0%}"
        return outcome, f"{interval}: {why}"
    return outcome, f"{interval}: " + ("; ".join(comparison.reasons) or "inconclusive")


def _time_per_unit(result: WorkloadResult, per_sample: bool) -> list[float]:
    """Per-repeat step times, or seconds per sample when the change altered the batch.

    A fix that changes how many samples a step trains on (a larger batch, gradient
    accumulation) makes each step longer and still wins if it trains more per second: the
    comparison is then per sample, or it would refute every such fix.
    """
    steps = metric_values(result)["step_time_s"]
    samples = result.samples_per_step
    if not per_sample or not samples:
        return steps
    return [value / samples for value in steps]


def _with_outcome(item: Advice, measurement: Verification) -> Advice:
    note = f"measured on this machine: {measurement.reason}"
    if measurement.loss_parity is False:
        note += "; the final loss changed by more than 1 % (the change alters the maths)"
    status = {"verified": "verified", "refuted": "refuted"}.get(measurement.outcome)
    updated = replace(item, notes=(*item.notes, note))
    return with_status(updated, status) if status else updated  # type: ignore[arg-type]


def _unmeasured(
    item: Advice,
    target: WorkloadUnderTest,
    outcome: Outcome,
    reason: str,
    knobs: Mapping[str, KnobValue] | None = None,
) -> Verification:
    return Verification(
        rule_id=item.rule_id,
        workload=target.name,
        knobs=dict(item.verify_knobs if knobs is None else knobs),
        outcome=outcome,
        reason=reason,
    )


def _loss_parity(before: WorkloadResult, after: WorkloadResult) -> bool | None:
    return losses_match(
        before.summary.final_loss if before.summary else None,
        after.summary.final_loss if after.summary else None,
    )


def _assignment(workload: str, key: str, value: KnobValue) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"knob {key}={value!r} is not a finite number", "fix the rule's knob")
    return f"{workload}.{key}={'null' if value is None else value}"
