"""The advice document (``perfgate.advice``): per workload, the evidence a profiled window
gave, what bounds the workload, the ranked advice of the rules that fired and, with
``--verify``, what re-running with each fix measured.

Written by ``perfgate advise --json``, by ``perfgate run --profile`` beside its result
(``<result>.advice.json``) and by ``perfgate gate`` (``advice.json``); read back through
:data:`ADVICE` by the HTML report and the PR comment (whose job runs no code of the pull
request: every string is escaped by the renderer, never trusted).

Format history:

- 1.0 (perfgate 0.1, 2026-11-29): first version.
- 1.1 (2026-12-01): each workload's ``diagnosis`` (optional): what bounds it in the profiled
  window (:mod:`perfgate.documents.diagnosis`).
- 1.2 (2026-12-02): the header's ``schema_minor``.
- 1.3 (2026-12-04): advice read from a trace file (``perfgate advise --trace``): a workload's
  ``source`` (the trace) and ``inferred`` (the configuration facts the trace implied, each with
  its reason), its ``changes`` against an earlier trace (``--before``: a
  :class:`~perfgate.documents.trace_diff.TraceDiff`); each advice's ``pattern`` and
  ``location`` (the code the rule saw, and where) and ``estimate_basis`` (what its estimated
  speed-up rests on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from perfgate.documents.base import DocumentKind
from perfgate.documents.diagnosis import Diagnosis
from perfgate.documents.trace_diff import TraceDiff

Confidence = Literal["high", "medium", "low"]
"""How sure a rule is of its trigger (``perfgate.advise.rules``)."""
Tier = Literal["high", "medium", "low"]
"""The estimated saving's tier (``perfgate.advise.ranking.tier_of``)."""
Status = Literal["unverified", "verified", "refuted", "unverifiable"]
"""Where the advice stands after verification: ``verified`` (measured faster beyond the
band), ``refuted`` (measured: no gain beyond the band, or slower), ``unverifiable`` (no knob
to measure it with), ``unverified`` (not settled by a measurement: not measured, or measured
inconclusive, or the measurement failed; its :class:`Verification` says which)."""
Outcome = Literal["verified", "refuted", "inconclusive", "unverifiable", "failed"]
"""What one verification measured."""
Standing = Literal["verified", "unverified", "unverifiable", "inconclusive", "failed", "refuted"]
"""What every rendering (terminal, PR comment, HTML report) shows for one piece of advice:
its status, or, when a verification measured it without settling it, the verification's
``inconclusive`` or ``failed``. See :func:`standing`."""

EvidenceValue = bool | int | float | str
"""One evidence value (``perfgate.advise.expr.Value``)."""
KnobSetting = bool | int | float | str | None
"""One knob's value (``perfgate.workloads.protocol.KnobValue``)."""


@dataclass(frozen=True, kw_only=True)
class Advice:
    """One fired rule: what to do, what it should save, and the numbers behind the claim."""

    rule_id: str
    title: str
    category: str
    confidence: Confidence
    saving: float
    """Estimated saving as a fraction of step time."""
    tier: Tier
    evidence: Mapping[str, EvidenceValue]
    """Every evidence value the rule read: name → value."""
    fix: str
    snippet: str
    references: tuple[str, ...]
    verify_knobs: Mapping[str, KnobSetting]
    """Knob values (formulas already computed) whose A/B run verifies the advice; empty:
    unverifiable."""
    status: Status = "unverified"
    """Set by the verification step; refuted advice ranks after the rest."""
    notes: tuple[str, ...] = field(default=())
    """Caveats worth showing (a knob that could not be computed, a speed-up below 1, a fact
    assumed rather than recorded)."""
    pattern: str | None = None
    """The code pattern the rule saw, when it tells one from another (``nn.MultiheadAttention
    returning its weights`` against a hand-written chain); the fix is the pattern's."""
    location: str | None = None
    """Where the pattern ran: the module and the source line, when the profile's stack gives
    them (``Owlv2Attention · transformers/models/owlv2/modeling_owlv2.py(410): forward``)."""
    estimate_basis: str | None = None
    """What the estimated speed-up rests on: a microbenchmark measured on this machine at the
    workload's shapes, or the rule's constant (and why that constant)."""


@dataclass(frozen=True, kw_only=True)
class InferredFact:
    """A configuration fact read from a trace rather than from the live workload
    (``perfgate.trace.inference``), with what in the trace says so."""

    name: str
    """The evidence catalogue's name."""
    value: EvidenceValue
    reason: str
    assumed: bool = False
    """Not recorded at all: PyTorch's default, assumed so that advice reading it can fire,
    and said in that advice's notes."""


@dataclass(frozen=True, kw_only=True)
class Verification:
    """What re-running with the advice's knobs measured."""

    rule_id: str
    workload: str
    knobs: Mapping[str, KnobSetting]
    outcome: Outcome
    reason: str
    rounds: int = 0
    speedup: float | None = None
    """Unchanged step time over changed step time (1.25 = 25 % faster); None if not measured."""
    speedup_ci: tuple[float, float] | None = None
    p_value: float | None = None
    baseline_step_s: float | None = None
    changed_step_s: float | None = None
    per_sample: bool = False
    """The change altered the samples per step, so the two step figures are seconds per
    sample (and the speed-up is per sample), not seconds per step."""
    loss_parity: bool | None = None
    """Final losses within 1 % of each other; None when a side has no loss."""


def found_text(item: Advice) -> str | None:
    """``pattern in where``, as far as the advice knows them (None when it names no pattern):
    the same words in the terminal, the PR comment and the report."""
    if item.pattern is None:
        return None
    return f"{item.pattern} in {item.location}" if item.location else item.pattern


def standing(item: Advice, proof: Verification | None) -> Standing:
    """How ``item`` stands: what its verification ``proof`` found, or, never measured
    (``proof`` None), its status."""
    return proof.outcome if proof is not None else item.status


_STANDING_GROUP: dict[Standing, int] = {
    "verified": 0,
    "unverified": 1,
    "unverifiable": 1,
    "failed": 1,
    "inconclusive": 2,
    "refuted": 3,
}


def measured_order(item: Advice, proof: Verification | None) -> tuple[int, float]:
    """Where a measurement puts ``item`` among a workload's advice (smaller first).

    A measurement outranks an estimate: verified advice comes first, the surest gain first
    (the measured speed-up's lower bound); then the advice nothing measured (its estimate
    ranks it, see ``perfgate.advise.ranking.rank``); then advice measured inconclusive, which
    could not show a gain, by its measured speed-up; refuted advice (no gain, or slower) last,
    by its measured speed-up. The same order in the terminal, the PR comment and the report.
    """
    shown = standing(item, proof)
    group = _STANDING_GROUP[shown]
    if proof is None or proof.speedup is None:
        return group, 0.0
    if shown == "verified" and proof.speedup_ci is not None:
        return group, -proof.speedup_ci[0]
    return group, -proof.speedup if group != 1 else 0.0


def in_measured_order(advice: Sequence[Advice], proofs: Mapping[str, Verification]) -> list[Advice]:
    """``advice`` (ranked by ``perfgate advise``) in :func:`measured_order`, keeping the
    document's order where the measurements do not decide: a document written before advice
    was ranked by measurement reads in the same order as a new one."""
    return sorted(advice, key=lambda item: measured_order(item, proofs.get(item.rule_id)))


@dataclass(frozen=True, kw_only=True)
class WorkloadAdvice:
    """One workload: its evidence, ranked advice and (with --verify) the measurements."""

    name: str
    preset: str
    knobs: Mapping[str, Any]
    status: str
    """How its profiling ended (``ok``, or why not: its error says more)."""
    error: str | None = None
    evidence: Mapping[str, EvidenceValue] = field(default_factory=dict)
    """The profiled window's evidence: catalogue name → value (``perfgate.advise.catalogue``)."""
    advice: list[Advice] = field(default_factory=list)
    verifications: list[Verification] = field(default_factory=list)
    trace_path: Path | None = None
    """Where the profiler trace was kept (``--trace-dir``), if it was."""
    diagnosis: Diagnosis | None = None
    """What bounds the workload in the profiled window; advice acting on it ranks first."""
    source: str | None = None
    """The trace file the advice was read from (``perfgate advise --trace``); None when
    perfgate profiled the workload itself."""
    inferred: list[InferredFact] = field(default_factory=list)
    """What the trace implied about the configuration (a trace's advice only)."""
    changes: TraceDiff | None = None
    """What moved since an earlier trace of the same job (``--before``)."""


@dataclass(frozen=True, kw_only=True)
class AdviceReport:
    """What one ``perfgate advise`` found: a workload's advice per profiled workload."""

    device: str
    workloads: list[WorkloadAdvice]


ADVICE: DocumentKind[AdviceReport] = DocumentKind(
    name="perfgate.advice",
    major=1,
    minor=3,
    model=AdviceReport,
    produced_by="perfgate advise --json, perfgate run --profile or perfgate gate",
)
