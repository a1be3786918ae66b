"""The verdict document (``perfgate.verdict``) and the error document (``perfgate.error``).

The verdict is what ``perfgate compare`` and ``perfgate gate`` decided: per workload, per metric,
the effect with its interval, the test, the verdict and why; the overall verdict and how CI was
told to treat an inconclusive one. The report, the PR comment (rendered by a job that runs no
code of the pull request) and CI read it back through :data:`VERDICT`.

Format history:

- 1.0 (perfgate 0.1, 2026-11): first version.
- 1.1 (2026-12-02): workload statuses ``missing`` and ``definition_changed`` (issue 16); the
  document header's ``schema_minor``.
- 1.2 (2026-12-06): ``base_commit`` (optional): the base revision the head was judged against.
- 1.3 (2026-12-06): a workload's ``work_changes`` (optional): its exact work counters that
  differ from the baseline's, judged without statistics.
- 1.4 (2026-12-06): a workload's ``attribution`` (optional): per operator and kernel, what moved
  between base and head in interleaved profiled windows.

The error document is what the gate leaves when nothing could be judged: the problem, its fix
and the exit code (usage or infrastructure, never a verdict's).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from perfgate.documents.base import DocumentKind, json_ready
from perfgate.documents.trace_diff import ChangeKind, Side
from perfgate.errors import ExitCode, InfrastructureError, PerfgateError, UsageError

Direction = Literal["lower", "higher"]
Verdict = Literal["regression", "improvement", "no_change", "inconclusive"]


@dataclass(frozen=True, kw_only=True)
class SideQuality:
    """What is wrong with one side's samples, if anything."""

    bimodal: bool = False
    cv: float | None = None
    throttled_share: float | None = None


@dataclass(frozen=True, kw_only=True)
class MetricComparison:
    """One metric of one workload: the effect, its interval, the test and the verdict."""

    metric: str
    direction: Direction
    baseline_median: float
    head_median: float
    ratio: float
    """Worse-is-greater ratio (1.05 = 5 % worse): the median of all pairwise repeat ratios."""
    ci_low: float
    ci_high: float
    p_value: float
    threshold: float
    """Practical threshold as a relative change (0.05 = 5 %)."""
    min_detectable: float
    """Smallest relative worsening this comparison would flag (inf when it never could)."""
    baseline_repeats: int
    head_repeats: int
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    p_adjusted: float | None = None
    quality: tuple[SideQuality, SideQuality] = field(default=(SideQuality(), SideQuality()))
    baseline_values: tuple[float, ...] = ()
    head_values: tuple[float, ...] = ()
    """The per-repeat values compared (sorted): the report draws the two distributions from
    the verdict itself, so the picture is of exactly the numbers that were judged."""
    method: Literal["bootstrap", "sequential"] = "bootstrap"
    """``bootstrap``: the fixed-size test of this module (a stored baseline, or another run);
    ``sequential``: the repeated confidence interval of an interleaved A/B
    (``perfgate.stats.sequential``), valid at whatever round it stopped."""
    derived_from: str | None = None
    """Set when this metric is another one recomputed at fixed work per step (samples/s from
    step time): shown beside it with the same interval, never tested again nor counted twice."""
    rounds_needed: int | None = None
    """Sequential only: roughly how many rounds would decide at the measured noise."""


Overall = Literal["pass", "regression", "inconclusive"]
InconclusivePolicy = Literal["exit4", "pass", "fail"]
"""How CI treats an inconclusive verdict: its own exit code 4, a pass, or a failure."""


WorkloadStatus = Literal[
    "compared", "no_baseline", "loss_mismatch", "missing", "definition_changed"
]
"""How a workload was judged. ``missing``: a workload of the base's suite that the head did not
measure (dropped, renamed, moved or unmeasurable there): the gate fails. ``definition_changed``:
the head changed the workload's definition (its code), so no stored baseline describes it; only
an interleaved A/B against the base can judge it, and until one has, it is inconclusive."""


@dataclass(frozen=True, kw_only=True)
class WorkChange:
    """One exact work counter of a step that differs between the baseline and the head: a
    counter of the result's ``work`` (``operators``, ``host_syncs``, …) or one operator's
    dispatches (``aten.clone``). No noise touches these counts, so any difference is a change
    of the work itself, whatever the timing verdict."""

    counter: str
    base: int
    head: int


@dataclass(frozen=True, kw_only=True)
class Mover:
    """One operator (host self time) or GPU kernel whose use per step moved from base to head,
    over several profiled windows of each side measured alternately."""

    side: Side
    name: str
    change: ChangeKind
    base_calls: float
    head_calls: float
    """Calls (launches) per step, median over each side's windows."""
    base_us: float
    head_us: float
    """Time per step (µs), median over each side's windows."""
    delta_low_us: float
    delta_high_us: float
    """The least and the most head-minus-base time per step over every pair of windows: the
    change is only called slower (or faster) when the whole range is."""
    step_share: float
    """``(head_us - base_us)`` over the base step: its part of the step's change."""


@dataclass(frozen=True, kw_only=True)
class Attribution:
    """What moved inside a workload's step, base against head (``perfgate.trace.attribution``)."""

    windows: int
    """Profiled windows per side (alternated base, head, base, …), each a fresh process."""
    base_step_ms: float
    head_step_ms: float
    """Median profiled step of each side (under the profiler: longer than the timed step)."""
    movers: list[Mover] = field(default_factory=list)
    omitted: int = 0
    """Movers left out beyond the list (each smaller than the last one listed)."""


@dataclass(frozen=True, kw_only=True)
class WorkloadVerdict:
    """One workload: how it compared, metric by metric."""

    name: str
    status: WorkloadStatus
    baseline_origin: str | None = None
    comparisons: list[MetricComparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    work_changes: list[WorkChange] = field(default_factory=list)
    """The step's exact work counters that differ from the baseline's (format 1.3), largest
    relative change first; empty when equal, or when a side did not count them."""
    attribution: Attribution | None = None
    """Per operator and kernel, what moved (format 1.4): a regression confirmed by an
    interleaved A/B, or on request; None otherwise."""


@dataclass(frozen=True, kw_only=True)
class CompareVerdict:
    """The result of ``perfgate compare``."""

    overall: Overall
    head_run_id: str
    workloads: list[WorkloadVerdict]
    environment_differences: list[str]
    method: Literal["baseline", "interleaved"] = "baseline"
    """``baseline``: head judged against stored/another run's repeats; ``interleaved``: base and
    head measured alternately in this job (``--ab``, or ``--confirm`` re-running an alert)."""
    notes: list[str] = field(default_factory=list)
    """Run-level explanations (what was confirmed, calibration hints), one sentence each."""
    head_commit: str | None = None
    head_subject: str | None = None
    """The head's commit and its subject line, for the reader of the comment and report."""
    inconclusive_policy: InconclusivePolicy = "exit4"
    """How CI is told to treat this verdict when it is inconclusive (the governing
    configuration's ``inconclusive``, or the command line's)."""
    base_commit: str | None = None
    """The base revision the head was judged against: the base ref whose baselines and
    configuration governed, or the base side of an interleaved A/B (null for a baseline file)."""

    def exit_code(self, inconclusive: InconclusivePolicy | None = None) -> ExitCode:
        """The documented exit code; ``inconclusive`` (default: the verdict's own policy)
        chooses how CI treats an inconclusive verdict."""
        inconclusive = inconclusive or self.inconclusive_policy
        if self.overall == "regression":
            return ExitCode.REGRESSION
        if self.overall == "inconclusive":
            return {
                "fail": ExitCode.REGRESSION,
                "pass": ExitCode.OK,
                "exit4": ExitCode.INCONCLUSIVE,
            }[inconclusive]
        return ExitCode.OK


def _dump_verdict(verdict: CompareVerdict) -> dict[str, Any]:
    """The verdict's fields, and the exit code it gives under its own policy (derived, for
    CI steps that read one number)."""
    return {**json_ready(asdict(verdict)), "exit_code": int(verdict.exit_code())}


def verdict_document(verdict: CompareVerdict, policy: InconclusivePolicy) -> dict[str, Any]:
    """The document of ``verdict`` judged under ``policy``."""
    return VERDICT.dump(replace(verdict, inconclusive_policy=policy))


VERDICT: DocumentKind[CompareVerdict] = DocumentKind(
    name="perfgate.verdict",
    major=1,
    minor=4,
    model=CompareVerdict,
    produced_by="perfgate compare --json or perfgate gate",
    dump_model=_dump_verdict,
    infinite_as_null=True,
)


@dataclass(frozen=True, kw_only=True)
class ErrorDocument:
    """Why nothing could be judged: the problem, its fix, and the exit code it ended with."""

    exit_code: Literal[2, 3]
    """Usage (2) or infrastructure (3): an error is never a regression (1) or a pass (0)."""
    problem: str
    fix: str | None = None

    @classmethod
    def of(cls, error: PerfgateError) -> ErrorDocument:
        usage = error.exit_code == ExitCode.USAGE
        return cls(exit_code=2 if usage else 3, problem=error.problem, fix=error.fix)

    def error(self) -> PerfgateError:
        """The typed error it records."""
        kind = UsageError if self.exit_code == ExitCode.USAGE else InfrastructureError
        return kind(self.problem, self.fix)


ERROR: DocumentKind[ErrorDocument] = DocumentKind(
    name="perfgate.error",
    major=1,
    minor=0,
    model=ErrorDocument,
    produced_by="perfgate gate (when nothing could be judged)",
)
