"""Evaluating rules over one workload's evidence, and ranking the advice that fires.

A rule fires when it applies (device, compute capability, workload kind), every evidence it
``requires`` is present, its fix is not ``already_on`` and ``when`` is true. Any expression
that is undefined (missing evidence, a division by zero) keeps it from firing — and the reason
is kept (``NotFired``), so a rule that never fires can be asked why instead of staying silent.

The estimated saving is Amdahl's: ``affected × (1 − 1/speedup)``, the share of step time the
fix touches times the part of it the fix removes; ``affected`` is clamped to [0, 1], the
saving to [0, affected] and, when the rule sets it, to ``max_saving``. A speed-up below 1 gives
a saving of 0 rather than hiding the advice: the trigger held, the estimate says "not worth it",
and both are shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from perfgate.advise.expr import Undefined, Value, evaluate
from perfgate.advise.rules import Formula, Pattern, Rule
from perfgate.documents.advice import Advice, Status, Tier, Verification, measured_order
from perfgate.documents.ceilings import FixSpeedup
from perfgate.workloads.knobs import STANDARD_KNOBS
from perfgate.workloads.protocol import KnobValue

HIGH_TIER = 0.05
"""An estimated saving of at least 5 % of step time is high-impact advice."""
MEDIUM_TIER = 0.03
"""At least 3 % is medium; anything below is low."""
_CONFIDENCE_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class AdviceContext:
    """What was profiled, when the evidence itself does not say (it wins otherwise unset),
    and the fixes measured on this machine at the workload's shapes."""

    device: str | None = None
    compute_capability: float | None = None
    workload_kind: str | None = None
    measured: Mapping[str, FixSpeedup] = field(default_factory=dict)
    """Fix microbenchmark name → what it measured (``perfgate.ceilings.fixes``); a rule
    naming one in ``measured_speedup`` estimates with that figure instead of its constant."""


@dataclass(frozen=True)
class NotFired:
    """A rule that did not fire, and why (for ``advise --explain`` and for tests)."""

    rule_id: str
    reason: str


def tier_of(saving: float) -> Tier:
    """``high`` from 5 % of step time, ``medium`` from 3 %, else ``low``."""
    if saving >= HIGH_TIER:
        return "high"
    return "medium" if saving >= MEDIUM_TIER else "low"


def advise(
    rules: Iterable[Rule],
    evidence: Mapping[str, Value],
    context: AdviceContext | None = None,
    binding: Iterable[str] = (),
) -> list[Advice]:
    """The advice of every rule that fires on ``evidence``, ranked (see ``rank``)."""
    outcomes = (evaluate_rule(rule, evidence, context or AdviceContext()) for rule in rules)
    return rank((outcome for outcome in outcomes if isinstance(outcome, Advice)), binding)


def rank(
    advice: Iterable[Advice],
    binding: Iterable[str] = (),
    proofs: Mapping[str, Verification] | None = None,
) -> list[Advice]:
    """Measured advice by its measurement (``perfgate.documents.advice.measured_order``:
    verified first by the lower bound of its speed-up, refuted last); advice nothing measured
    by its estimate: that in a ``binding`` category (one acting on what bounds the workload,
    see ``perfgate.diagnose``) first, then by saving (largest first), confidence, rule id.
    ``proofs``: the verifications, by rule id."""
    first = frozenset(binding)
    measured = proofs or {}
    return sorted(
        advice,
        key=lambda a: (
            *measured_order(a, measured.get(a.rule_id)),
            a.category not in first,
            -a.saving,
            _CONFIDENCE_ORDER[a.confidence],
            a.rule_id,
        ),
    )


def evaluate_rule(
    rule: Rule, evidence: Mapping[str, Value], context: AdviceContext
) -> Advice | NotFired:
    """``Advice`` when ``rule`` fires on ``evidence``, else ``NotFired`` with the reason."""
    reason = _not_applicable(rule, evidence, context)
    if reason is not None:
        return NotFired(rule.id, reason)
    missing = [name for name in rule.requires if evidence.get(name) is None]
    if missing:
        return NotFired(rule.id, f"no evidence {', '.join(missing)}")
    for label, formula in (("already_on", rule.already_on), ("when", rule.when)):
        value = evaluate(formula.tree, evidence)
        if isinstance(value, Undefined):
            return NotFired(rule.id, f"{label} is undefined: {value.reason}")
        if not isinstance(value, bool):
            return NotFired(rule.id, f"{label} gave {value!r}, not true or false")
        if label == "already_on" and value:
            return NotFired(rule.id, "the fix is already on")
        if label == "when" and not value:
            return NotFired(rule.id, "when is false")
    measured = context.measured.get(rule.measured_speedup or "")
    saving, notes = _saving(rule, evidence, measured)
    if isinstance(saving, NotFired):
        return saving
    knobs, knob_notes = _knobs(rule, evidence)
    pattern = matching_pattern(rule, evidence)
    return Advice(
        rule_id=rule.id,
        title=rule.title,
        category=rule.category,
        confidence=rule.confidence,
        saving=saving,
        tier=tier_of(saving),
        evidence={
            name: evidence[name]
            for name in sorted(rule.evidence_names)
            if evidence.get(name) is not None
        },
        fix=pattern.fix if pattern is not None else rule.fix,
        snippet=pattern.snippet
        if pattern is not None and pattern.snippet is not None
        else rule.snippet,
        references=rule.references,
        verify_knobs=knobs,
        notes=(*notes, *knob_notes),
        pattern=pattern.name if pattern is not None else None,
        location=_site(pattern, evidence),
        estimate_basis=_basis(rule, evidence, measured),
    )


def matching_pattern(rule: Rule, evidence: Mapping[str, Value]) -> Pattern | None:
    """The first of the rule's code patterns whose condition holds on ``evidence`` (an
    undefined condition does not hold), or None: the rule's own fix stands."""
    for pattern in rule.patterns:
        if evaluate(pattern.when.tree, evidence) is True:
            return pattern
    return None


def _site(pattern: Pattern | None, evidence: Mapping[str, Value]) -> str | None:
    if pattern is None or pattern.site is None:
        return None
    site = evidence.get(pattern.site)
    return site if isinstance(site, str) else None


def with_status(advice: Advice, status: Status) -> Advice:
    """``advice`` with its verification status set (re-rank afterwards with ``rank``)."""
    return replace(advice, status=status)


def _not_applicable(
    rule: Rule, evidence: Mapping[str, Value], context: AdviceContext
) -> str | None:
    applies = rule.applies
    device = context.device or _text(evidence.get("device"))
    if applies.devices and device not in applies.devices:
        return f"applies to {', '.join(applies.devices)}, not {device or 'an unknown device'}"
    if applies.min_compute_capability is not None or applies.max_compute_capability is not None:
        capability = context.compute_capability or _capability(evidence.get("compute_capability"))
        if capability is None:
            return "the compute capability is unknown"
        low = applies.min_compute_capability
        high = applies.max_compute_capability
        if (low is not None and capability < low) or (high is not None and capability > high):
            return f"compute capability {capability:g} is outside the rule's range"
    if applies.workload_kinds:
        kind = context.workload_kind or _text(evidence.get("workload_kind"))
        if kind not in applies.workload_kinds:
            return (
                f"applies to {', '.join(applies.workload_kinds)} workloads, not {kind or 'unknown'}"
            )
    return None


def _basis(rule: Rule, evidence: Mapping[str, Value], measured: FixSpeedup | None) -> str:
    """What the advice's estimated speed-up rests on, in words."""
    if measured is not None:
        return (
            f"a microbenchmark on this machine, {measured.basis}: {measured.speedup:.2f}x "
            f"(paired samples {measured.low:.2f}-{measured.high:.2f})"
        )
    speedup = _number(rule.speedup, evidence)
    shown = f"{speedup:g}x" if isinstance(speedup, float) else rule.speedup.source
    if rule.measured_speedup is not None:
        return (
            f"the rule's constant speed-up {shown} (the {rule.measured_speedup} benchmark did "
            "not run here)"
        )
    return f"the rule's speed-up {shown}"


def _saving(
    rule: Rule, evidence: Mapping[str, Value], measured: FixSpeedup | None = None
) -> tuple[float | NotFired, list[str]]:
    values: dict[str, float] = {}
    formulas = [("speedup", rule.speedup), ("affected", rule.affected)]
    if rule.max_saving is not None:
        formulas.append(("max_saving", rule.max_saving))
    for label, formula in formulas:
        number = _number(formula, evidence)
        if isinstance(number, str):
            return NotFired(rule.id, f"{label} is undefined: {number}"), []
        values[label] = number
    speedup = measured.speedup if measured is not None else values["speedup"]
    if speedup <= 0:
        return NotFired(rule.id, f"speedup is {speedup:g}, not a speed-up factor"), []
    affected = min(max(values["affected"], 0.0), 1.0)
    saving = min(max(affected * (1.0 - 1.0 / speedup), 0.0), affected)
    if "max_saving" in values:
        saving = min(saving, max(values["max_saving"], 0.0))
    notes = (
        [f"estimated speed-up {speedup:g} is below 1: no saving expected"] if speedup < 1 else []
    )
    return saving, notes


def _number(formula: Formula, evidence: Mapping[str, Value]) -> float | str:
    """The formula's finite number, or the reason it has none."""
    value = evaluate(formula.tree, evidence)
    if isinstance(value, Undefined):
        return value.reason
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return f"{formula.source!r} gave {value!r}, not a number"
    return float(value)


def _knobs(rule: Rule, evidence: Mapping[str, Value]) -> tuple[dict[str, KnobValue], list[str]]:
    """The verify knobs with formulas computed; none at all when one cannot be (a partial
    change would verify something other than the advice)."""
    knobs: dict[str, KnobValue] = {}
    for name, setting in rule.verify_knobs.items():
        if not isinstance(setting, Formula):
            knobs[name] = setting
            continue
        value, problem = _knob_value(name, evaluate(setting.tree, evidence))
        if problem:
            return {}, [f"unverifiable here: knob {name} = {setting.source} {problem}"]
        knobs[name] = value
    return knobs, []


def _knob_value(name: str, value: Value | Undefined) -> tuple[KnobValue, str]:
    """A computed knob value in the knob's type, or an empty value and what is wrong."""
    if isinstance(value, Undefined):
        return None, f"is undefined ({value.reason})"
    spec = STANDARD_KNOBS[name]
    if spec.kind is int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            return None, f"gave {value!r}, not a number"
        if value < 0 or value != int(value):
            return None, f"gave {value!r}, not a whole number >= 0"
        return int(value), ""
    if spec.kind is bool:
        return (value, "") if isinstance(value, bool) else (None, f"gave {value!r}, not true/false")
    if not isinstance(value, str) or (spec.choices is not None and value not in spec.choices):
        return None, f"gave {value!r}, not one of {', '.join(spec.choices or ())}"
    return value, ""


def _text(value: Value | None) -> str | None:
    return value if isinstance(value, str) else None


def _capability(value: Value | None) -> float | None:
    """The catalogue writes compute capability as text ("8.0"); a number is accepted too."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        capability = float(value)
    except ValueError:
        return None
    return capability if math.isfinite(capability) else None
