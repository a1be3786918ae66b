"""The compare workflow as a library call: a head judged against its baseline, or two refs A/B.

Three ways in, one typed outcome (:class:`Judgement`), which the command line maps to output
and an exit code:

- :func:`judge_stored`: a head result document against a baseline (database, ``baselines/``
  snapshots or another document), with the caller's own configuration (a developer's check);
- :func:`judge_with_trusted`: the same, but everything that decides comes from the base ref
  (``perfgate.compare.trusted``): suite membership, thresholds, policy, rounds, database,
  snapshots; every base workload is judged (``perfgate.compare.membership``), and with
  ``confirm`` every flagged one is settled by an interleaved A/B. ``perfgate compare
  --base-ref`` and ``perfgate gate`` both end here;
- :func:`judge_refs`: ``compare --ab BASE HEAD``, both refs measured interleaved, governed by
  the base ref's configuration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from perfgate.calibration.explain import annotate_inconclusive
from perfgate.calibration.thresholds import calibrated_thresholds
from perfgate.compare.ab import (
    compare_refs,
    config_in_checkout,
    confirm_alerts,
    with_workload_notes,
)
from perfgate.compare.baseline_source import (
    BaselineWorkload,
    from_result,
    from_snapshots,
)
from perfgate.compare.gate import compare_runs
from perfgate.compare.membership import GatedWorkload, base_plan, with_membership
from perfgate.compare.outputs import (
    advice_lines,
    local_link,
    read_advice,
    write_error_comment,
    write_html,
    write_outputs,
)
from perfgate.compare.sequential import ABBudget, ab_budget
from perfgate.compare.trusted import TrustedInputs, head_view, trusted_inputs
from perfgate.compare.worktrees import checked_out, repository_root
from perfgate.config import Config, load_config
from perfgate.documents.calibration import Calibration
from perfgate.documents.result import RunResult, load_result
from perfgate.documents.verdict import CompareVerdict, InconclusivePolicy
from perfgate.errors import InfrastructureError, PerfgateError, UsageError
from perfgate.runner.device import resolve_device
from perfgate.runner.interleave import InterleaveObserver
from perfgate.runner.plan import Selection, parse_slowdown
from perfgate.thresholds import Thresholds


@dataclass(frozen=True, kw_only=True)
class ABLimits:
    """How an interleaved A/B may run: the device, the command line's limits (None: the
    governing configuration's, else the device's defaults), where its documents go, and who
    watches the rounds."""

    device: str
    rounds: int | None = None
    budget_s: float | None = None
    out_dir: Path
    observer: InterleaveObserver | None = None

    def budget(self, governing: Config) -> ABBudget:
        """The budget, from the governing configuration under the command line's flags."""
        return ab_budget(
            governing, resolve_device(self.device), rounds=self.rounds, budget_s=self.budget_s
        )


@dataclass(frozen=True, kw_only=True)
class BaselineChoice:
    """Where the baseline side comes from: another result document, a snapshot folder, or
    (neither) the database; on which branch, and whether another environment is accepted."""

    document: Path | None = None
    directory: Path | None = None
    branch: str = "main"
    allow_env_drift: bool = False


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """A verdict, how CI treats inconclusive, the head it judged, and the database whose
    history the report may show (the trusted one on the gate's path)."""

    verdict: CompareVerdict
    policy: InconclusivePolicy
    head: RunResult
    database_url: str
    database_root: Path


RoundWatch = Callable[[], AbstractContextManager[InterleaveObserver | None]]
"""Opens the watcher of an interleaved A/B (a progress display) for as long as it may run."""


@dataclass(frozen=True, kw_only=True)
class CompareRequest:
    """What ``perfgate compare`` is asked: a head document judged against its baseline
    (optionally confirmed against ``base_ref``), or two refs measured interleaved (``refs``);
    and which outputs to write."""

    config: Path | None = None
    """The configuration file; None: the nearest perfgate.toml or pyproject.toml upwards."""
    head: Path | None = None
    """The head result document; None with ``refs``."""
    refs: tuple[str, str] | None = None
    """``--ab BASE HEAD``: both refs measured interleaved."""
    baseline: BaselineChoice = field(default_factory=BaselineChoice)
    confirm: bool = False
    base_ref: str | None = None
    """The trusted base ref (default with ``confirm``: ``origin/$GITHUB_BASE_REF``)."""
    selection: Selection = field(default_factory=Selection)
    """``refs``: what to measure; ``base_ref``: its suite and workloads are the ones judged."""
    inject_slowdown: str | None = None
    """``refs`` canary: the head side's extra cost per step, as written (``5%``)."""
    device: str | None = None
    """cpu, cuda or auto; None: the configuration's (the head's, against a base ref)."""
    rounds: int | None = None
    budget_s: float | None = None
    ab_out: Path | None = None
    """Folder for the A/B result documents (default: .perfgate/ab/<UTC time>)."""
    inconclusive: str | None = None
    json_out: Path | None = None
    markdown: Path | None = None
    advice: Path | None = None
    """A ``perfgate advise --json`` file whose top advice the outputs show."""
    html: Path | None = None
    report_url: str | None = None


@dataclass(frozen=True, kw_only=True)
class CompareOutcome:
    """The judgement, the command's exit code, and one line per output written."""

    judgement: Judgement
    exit_code: int
    written: list[str]


def compare_session(request: CompareRequest, progress: RoundWatch = nullcontext) -> CompareOutcome:
    """``perfgate compare``: judge, explain, write the outputs. When nothing can be judged (a
    perfgate error), the comment (and job summary) say so before the error is raised."""
    try:
        return _compare(request, progress)
    except PerfgateError as error:
        write_error_comment(error, request.markdown)
        raise


def _compare(request: CompareRequest, progress: RoundWatch) -> CompareOutcome:
    settings = load_config(request.config)
    if request.inconclusive is not None:
        policy_from(request.inconclusive)
    advised = read_advice(request.advice)  # a bad file fails before anything runs
    choice = request.baseline
    with progress() as observer:
        limits = ABLimits(
            device=request.device or settings.device,
            rounds=request.rounds,
            budget_s=request.budget_s,
            out_dir=request.ab_out or default_ab_folder(settings.root),
            observer=observer,
        )
        judgement = _judge(request, settings, choice, limits)
    judgement = explained(judgement)
    verdict, policy = judgement.verdict, judgement.policy
    written = write_outputs(
        verdict,
        policy,
        request.json_out,
        request.markdown,
        advice_lines(advised),
        request.report_url or local_link(request.html),
    )
    if request.html is not None:
        database = (judgement.database_url, judgement.database_root)
        written.append(
            write_html(
                request.html,
                verdict,
                policy,
                judgement.head,
                advised,
                choice.branch,
                database,
                request.advice,
            )
        )
    return CompareOutcome(
        judgement=judgement, exit_code=int(verdict.exit_code(policy)), written=written
    )


def _judge(
    request: CompareRequest, settings: Config, choice: BaselineChoice, limits: ABLimits
) -> Judgement:
    selection = request.selection
    if request.refs is not None:
        if (
            request.head is not None
            or choice.document is not None
            or choice.directory is not None
            or request.confirm
        ):
            raise UsageError(
                "--ab measures both sides itself",
                "drop the head document, --baseline, --baseline-dir and --confirm",
            )
        text = request.inject_slowdown
        selection = replace(
            selection, inject_slowdown=None if text is None else parse_slowdown(text)
        )
        return judge_refs(
            settings, request.refs, selection, inconclusive=request.inconclusive, limits=limits
        )
    if request.head is None:
        raise UsageError("no head result document given", "pass HEAD.json, or use --ab")
    head_run = load_result(request.head)
    trusted_ref = request.base_ref or (default_base_ref() if request.confirm else None)
    if trusted_ref is None:
        return judge_stored(
            head_run, settings, choice, inconclusive=request.inconclusive, limits=limits
        )
    limits = replace(limits, device=request.device or head_run.device)
    return judge_against_base(
        head_run,
        settings,
        choice,
        trusted_ref,
        confirm=request.confirm,
        suite=selection.suite,
        workloads=selection.workloads,
        inconclusive=request.inconclusive,
        limits=limits,
    )


def default_base_ref() -> str:
    """``--confirm`` without ``--base-ref``: the pull request's base (``$GITHUB_BASE_REF``)."""
    base = os.environ.get("GITHUB_BASE_REF")
    if not base:
        raise UsageError(
            "--confirm needs the base revision to measure against",
            "pass --base-ref (e.g. origin/main)",
        )
    return f"origin/{base}"


def default_ab_folder(root: Path) -> Path:
    """``.perfgate/ab/<UTC time>`` under the project root: where an A/B's documents go."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return root / ".perfgate" / "ab" / stamp


def policy_from(text: str) -> InconclusivePolicy:
    """``exit4``, ``pass`` or ``fail``; anything else is a usage error."""
    if text not in ("exit4", "pass", "fail"):
        raise UsageError(f"--inconclusive {text!r} is not allowed", "use exit4, pass or fail")
    return cast(InconclusivePolicy, text)


def judge_stored(
    head: RunResult,
    settings: Config,
    choice: BaselineChoice,
    *,
    inconclusive: str | None,
    limits: ABLimits,
) -> Judgement:
    """The head against its baseline with the caller's own configuration (no base ref)."""
    thresholds, calibrated = calibrated_for(settings, settings, head, limits)
    baselines = baselines_for(head, choice, settings, choice.directory)
    verdict = compare_runs(
        head, baselines, allow_env_drift=choice.allow_env_drift, thresholds=thresholds
    )
    verdict = with_workload_notes(verdict, calibrated)
    return _judgement(verdict, policy_from(inconclusive or settings.inconclusive), head, settings)


def judge_against_base(
    head: RunResult,
    settings: Config,
    choice: BaselineChoice,
    base_ref: str,
    *,
    confirm: bool,
    suite: str | None,
    workloads: Sequence[str],
    inconclusive: str | None,
    limits: ABLimits,
) -> Judgement:
    """:func:`judge_with_trusted` with the base ref checked out for the occasion."""
    with trusted_inputs(settings, base_ref, choice.directory) as trusted:
        gated = base_plan(trusted.config, suite, workloads)
        return judge_with_trusted(
            head,
            trusted,
            choice,
            gated=gated,
            confirm=confirm,
            inconclusive=inconclusive,
            limits=limits,
        )


def judge_with_trusted(
    head: RunResult,
    trusted: TrustedInputs,
    choice: BaselineChoice,
    *,
    gated: Sequence[GatedWorkload],
    confirm: bool,
    inconclusive: str | None,
    limits: ABLimits,
    unmeasurable: dict[str, str] | None = None,
) -> Judgement:
    """The head judged by the base ref: its thresholds, policy, budget, database, snapshots,
    and its suite (``gated``: every one of them judged; ``unmeasurable`` says why the head
    could not measure some). With ``confirm``, every flagged workload is settled by an
    interleaved A/B of the base against the head's checkout."""
    governing = trusted.config
    thresholds, calibrated = calibrated_for(governing, governing, head, limits)
    baselines = baselines_for(head, choice, governing, trusted.baseline_dir)
    verdict = compare_runs(
        head,
        baselines,
        allow_env_drift=choice.allow_env_drift,
        thresholds=thresholds,
        require_baseline=False,
    )
    verdict = with_membership(verdict, head, gated, trusted.ref, unmeasurable)
    if not confirm and all(w.status == "no_baseline" for w in verdict.workloads):
        raise InfrastructureError(
            "no baseline for any head workload",
            "refresh and export baselines, pass --baseline, or let --confirm measure the base "
            "ref against the head",
        )
    if confirm:
        verdict = confirm_alerts(
            verdict,
            head,
            head_view(trusted),
            trusted.ref,
            gated=gated,
            thresholds=thresholds,
            device=resolve_device(limits.device),
            budget=limits.budget(governing),
            out_dir=limits.out_dir,
            observer=limits.observer,
        )
    verdict = with_workload_notes(verdict, calibrated)
    verdict = replace(verdict, notes=[*verdict.notes, trusted.note], base_commit=trusted.commit)
    policy = policy_from(inconclusive or governing.inconclusive)
    return _judgement(verdict, policy, head, governing)


def judge_refs(
    settings: Config,
    refs: tuple[str, str],
    selection: Selection,
    *,
    inconclusive: str | None,
    limits: ABLimits,
) -> Judgement:
    """``compare --ab``: both refs measured interleaved; the base ref's configuration governs
    the rounds, the budget, the thresholds and the policy (the head's cannot loosen them)."""
    repo = repository_root(settings.root)
    with checked_out(repo, [refs[0]]) as (base,):
        governing = config_in_checkout(settings, repo, base.path)
    budget = limits.budget(governing)

    def thresholds_for(
        thresholds: Thresholds,
        workloads: Sequence[tuple[str, str]],
        environment: Mapping[str, Any],
    ) -> tuple[Thresholds, dict[str, str]]:
        found = stored_calibrations(governing, workloads, environment)
        return calibrated_thresholds(thresholds, found, budget.max_rounds)

    outcome = compare_refs(
        settings,
        selection,
        refs[0],
        refs[1],
        device=resolve_device(limits.device),
        budget=budget,
        out_dir=limits.out_dir,
        observer=limits.observer,
        thresholds_for=thresholds_for,
    )
    policy = policy_from(inconclusive or governing.inconclusive)
    return _judgement(outcome.verdict, policy, outcome.head, settings)


def baselines_for(
    head: RunResult, choice: BaselineChoice, settings: Config, directory: Path | None
) -> dict[str, BaselineWorkload]:
    """The baseline side: another document, the snapshots in ``directory``, or the database
    that ``settings`` names."""
    if choice.document is not None and directory is not None:
        raise UsageError("--baseline and --baseline-dir exclude each other", "give one of them")
    if choice.document is not None:
        return from_result(load_result(choice.document), str(choice.document))
    if directory is not None:
        return from_snapshots(directory, head, choice.branch)
    from perfgate.compare.database_source import from_database  # lazy: the database stack

    return from_database(settings.database_url, settings.root, head, choice.branch)


def calibrated_for(
    governing: Config, database: Config, head: RunResult, limits: ABLimits
) -> tuple[Thresholds, dict[str, str]]:
    """The governing thresholds with calibrated bands for the head's workloads (calibrations
    read from ``database``'s store), at the A/B round budget ``governing`` allows."""
    found = stored_calibrations(
        database, [(w.name, w.definition_hash) for w in head.workloads], head.environment
    )
    return calibrated_thresholds(governing.thresholds, found, limits.budget(governing).max_rounds)


def stored_calibrations(
    settings: Config, workloads: Sequence[tuple[str, str]], environment: Mapping[str, Any]
) -> dict[str, Calibration]:
    """The newest calibration of each workload on this environment, best effort: no database
    (a file not created yet, a GPU box without the database libraries, an unreachable server)
    means none."""
    try:
        from perfgate.store.calibration import calibrations_for  # lazy: optional database code
        from perfgate.store.engine import StoreUnavailable, database_exists  # lazy: as above
    except ImportError:  # `perfgate run --no-store` machines may lack sqlmodel/sqlalchemy
        return {}
    try:
        if not database_exists(settings.database_url, settings.root):
            return {}
        return calibrations_for(settings.database_url, settings.root, workloads, environment)
    except StoreUnavailable:
        return {}


def explained(judgement: Judgement) -> Judgement:
    """Inconclusive timing verdicts explained by this machine's stored calibration, if any."""
    verdict = judgement.verdict
    if not any(c.verdict == "inconclusive" for w in verdict.workloads for c in w.comparisons):
        return judgement
    head = judgement.head
    found = stored_calibrations(
        replace_database(judgement),
        [(w.name, w.definition_hash) for w in head.workloads],
        head.environment,
    )
    return replace(judgement, verdict=annotate_inconclusive(verdict, found))


def replace_database(judgement: Judgement) -> Config:
    """A configuration naming the judgement's database (for readers that take one)."""
    return Config(root=judgement.database_root, database_url=judgement.database_url)


def _judgement(
    verdict: CompareVerdict, policy: InconclusivePolicy, head: RunResult, database: Config
) -> Judgement:
    return Judgement(
        verdict=verdict,
        policy=policy,
        head=head,
        database_url=database.database_url,
        database_root=database.root,
    )
