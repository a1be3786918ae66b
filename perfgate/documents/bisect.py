"""The bisect document (``perfgate.bisect``): which commit of a range made training slower.

Written by ``perfgate bisect GOOD BAD --json``: the range, every probe (an interleaved A/B of
two commits of it, with the interval it reached and the rounds it took), and the conclusion —
the culprit with its own effect interval and the exact work it changed, or the narrowest range
the probes could prove, or that the range holds no regression.

Format history: 1.0 (2026-12-06): first version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perfgate.documents.base import DocumentKind
from perfgate.documents.refresh import RefreshStep
from perfgate.documents.verdict import Attribution, WorkChange

ProbeState = Literal["regressed", "unchanged", "inconclusive"]
"""What a probe proved about its head commit against its base: slower beyond the threshold,
within it (or faster), or neither within its rounds."""
Conclusion = Literal["found", "narrowed", "no_regression"]


@dataclass(frozen=True, kw_only=True)
class BisectProbe:
    """One interleaved A/B of two commits of the range, read for the bisection."""

    base: str
    head: str
    state: ProbeState
    workload: str | None
    """The workload whose step time decided the probe (the worst one); None if none ran."""
    ratio: float | None = None
    """Head step time over base step time, and its interval (None when nothing compared)."""
    ci_low: float | None = None
    ci_high: float | None = None
    rounds: int = 0
    """A/B rounds the deciding workload took (the probe's cost)."""
    seconds: float = 0.0
    """Wall time of the probe, checkouts included."""


@dataclass(frozen=True, kw_only=True)
class BisectReport:
    """A bisection of ``good..bad`` (first-parent history, oldest first)."""

    good: str
    bad: str
    commits: list[str]
    """The range: ``good``, every commit after it, ``bad`` last."""
    workloads: list[str]
    conclusion: Conclusion
    first_bad: str | None
    """The earliest commit proven slower than its predecessor's side of the range: the culprit
    when ``found``; with ``narrowed``, the culprit is in (``last_good``, ``first_bad``]."""
    last_good: str | None
    culprit_subject: str | None = None
    effect: BisectProbe | None = None
    """``found``: the culprit's own A/B against its parent (its effect interval)."""
    work_changes: list[WorkChange] = field(default_factory=list)
    """``found``: the exact work counters the culprit changed (its A/B's deciding workload)."""
    attribution: Attribution | None = None
    """``found``: what moved per operator and kernel in the culprit's deciding workload."""
    probes: list[BisectProbe] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def rounds(self) -> int:
        """Every A/B round the bisection measured."""
        return sum(probe.rounds for probe in self.probes)


@dataclass(frozen=True, kw_only=True)
class ExplainedStep:
    """A slowdown a baseline refresh found and what ``perfgate bisect-steps`` made of it."""

    workload: str
    suite: str | None
    step: RefreshStep
    bisect: BisectReport | None = None
    """The bisection of the step's range; None when it was not searched (``skipped`` says why)."""
    skipped: str | None = None
    document: str | None = None
    """Where the bisection's document was written."""


BISECT: DocumentKind[BisectReport] = DocumentKind(
    name="perfgate.bisect",
    major=1,
    minor=0,
    model=BisectReport,
    produced_by="perfgate bisect",
)
