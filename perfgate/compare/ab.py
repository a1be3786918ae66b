"""Interleaved A/B: two revisions measured alternately in one job, and the confirmation of an
alert that way before a pull request is failed.

``compare --ab BASE HEAD`` checks both refs out as worktrees and measures them interleaved
(A B B A …, see :mod:`perfgate.runner.interleave`), so whatever the machine does meanwhile
lands on both sides, and sequentially: after every round the verdict's interval is updated
and a workload stops as soon as it decides (``perfgate.compare.sequential``).

``compare --confirm`` does the same for the workloads a baseline comparison flagged — the base
ref in a worktree against the working tree the head result was measured in — and the final
verdict for those workloads comes from the A/B run: a stored baseline measured days ago on
another runner of the same type is good evidence, but a same-machine, same-hour A/B is better,
and a red check costs people trust. An improvement is confirmed the same way before it is
reported.

Each side uses its own revision's workload code (user workload modules and source files are
imported from that side's checkout); the settings (steps, warm-up, threads, seed) and the
thresholds come from the base side, which a pull request cannot edit to pass itself.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perfgate import __version__
from perfgate.compare.attribution import with_attribution
from perfgate.compare.gate import overall_verdict
from perfgate.compare.membership import GatedWorkload
from perfgate.compare.sequential import ABBudget, SequentialJudge, judge_interleaved
from perfgate.compare.worktrees import Checkout, checked_out, repository_root, resolve_commit
from perfgate.config import Config, load_config
from perfgate.documents.result import (
    RunResult,
    RunSettings,
    SourceInfo,
    WorkloadResult,
    write_result,
)
from perfgate.documents.verdict import CompareVerdict, WorkloadVerdict
from perfgate.errors import InfrastructureError, UsageError, last_line
from perfgate.run import run_fingerprint, utc_now
from perfgate.runner.device import resolve_device
from perfgate.runner.interleave import Arm, InterleaveObserver, run_interleaved
from perfgate.runner.orchestrator import warm_launcher
from perfgate.runner.plan import Selection, prepare
from perfgate.runner.source import collect_source
from perfgate.thresholds import Thresholds


@dataclass(frozen=True, kw_only=True)
class Side:
    """One revision to measure: its configuration, its source facts, and a canary slowdown."""

    label: str
    config: Config
    source: SourceInfo
    inject_slowdown: float | None = None


ThresholdSource = Callable[
    [Thresholds, Sequence[tuple[str, str]], Mapping[str, Any]], tuple[Thresholds, dict[str, str]]
]
"""(the base side's thresholds, the (name, definition hash) of each workload, the environment
fingerprint) → the thresholds to judge with, and a note per workload whose band was changed
(the CLI's calibrated bands, ``perfgate.calibration.thresholds``)."""


def as_configured(
    thresholds: Thresholds, workloads: Sequence[tuple[str, str]], environment: Mapping[str, Any]
) -> tuple[Thresholds, dict[str, str]]:
    """The base side's thresholds as configured (no calibration)."""
    return thresholds, {}


@dataclass(frozen=True, kw_only=True)
class ABOutcome:
    """Both sides' result documents and the verdict judged on them."""

    base: RunResult
    head: RunResult
    paths: tuple[Path, Path]
    verdict: CompareVerdict


def compare_refs(
    config: Config,
    selection: Selection,
    base_ref: str,
    head_ref: str,
    *,
    device: str,
    budget: ABBudget,
    out_dir: Path,
    observer: InterleaveObserver | None = None,
    thresholds_for: ThresholdSource = as_configured,
    attribute: bool = True,
) -> ABOutcome:
    """``compare --ab``: both refs checked out and measured interleaved until decided; each
    workload whose step time regressed is then attributed per operator and kernel (unless
    ``attribute`` is off: a bisection's probes, which only need the verdict)."""
    repo = repository_root(config.root)
    with checked_out(repo, [base_ref, head_ref]) as (base, head):
        sides = [
            _side(config, repo, base, "base"),
            # --inject-slowdown slows the head side only: the canary of the nightly job.
            replace(_side(config, repo, head, "head"), inject_slowdown=selection.inject_slowdown),
        ]
        (base_run, head_run), thresholds, notes = measure_sides(
            sides, selection, device=device, budget=budget, observer=observer,
            thresholds_for=thresholds_for,
        )  # fmt: skip
        paths = _write(out_dir, base_run, head_run)
        verdict = with_workload_notes(judge_ab(base_run, head_run, thresholds, budget), notes)
        if attribute and not selection.inject_slowdown:  # a canary's cost is no operator's
            verdict = with_attribution(
                verdict, (sides[0].config, sides[1].config), (base_run, head_run), selection,
                device=device,
            )  # fmt: skip
    done = ", ".join(f"{w.name} {len(w.repeats)}" for w in head_run.workloads)
    note = (
        f"interleaved A/B of {base_ref} ({base.commit[:12]}) against {head_ref} "
        f"({head.commit[:12]}), rounds: {done} (at most {budget.max_rounds}); "
        f"documents: {paths[0]}, {paths[1]}"
    )
    verdict = replace(verdict, notes=[*verdict.notes, note])
    return ABOutcome(base=base_run, head=head_run, paths=paths, verdict=verdict)


def confirm_alerts(
    verdict: CompareVerdict,
    head: RunResult,
    head_config: Config,
    base_ref: str,
    *,
    gated: Sequence[GatedWorkload],
    thresholds: Thresholds,
    device: str,
    budget: ABBudget,
    out_dir: Path,
    observer: InterleaveObserver | None = None,
) -> CompareVerdict:
    """Re-judge every flagged workload by an interleaved A/B against ``base_ref``, with the
    ``thresholds`` the baseline comparison used (the base ref's, possibly calibrated).

    ``head_config`` is what the head side is measured with: the base's configuration over the
    head's code (``perfgate.compare.trusted.head_view``), so the A/B measures the base's
    definitions (presets, knobs) and settings on both sides, whatever the head's own
    configuration says. ``gated`` are the base's workloads (``perfgate.compare.membership``).

    Workloads the baseline comparison did not flag keep their verdict; flagged ones take the
    A/B verdict, with a note of what the baseline comparison had said.
    """
    flagged = [w.name for w in verdict.workloads if _flagged(w)]
    if not flagged:
        return verdict
    repo = repository_root(head_config.root)
    _check_head_checkout(repo, head)
    presets = {g.name: g.preset for g in gated}
    new = [name for name in flagged if name not in presets]
    flagged = [name for name in flagged if name in presets]
    if not flagged:
        return _note_new(verdict, new, base_ref)
    with checked_out(repo, [base_ref]) as (base,):
        sides = [
            _side(head_config, repo, base, "base"),
            Side(
                label="head",
                config=head_config,
                source=head.source,
                inject_slowdown=head.settings.inject_slowdown,
            ),
        ]
        selection = Selection(
            workloads=[f"{name}@{presets[name]}" for name in flagged],
            nproc_per_node=head.settings.nproc_per_node,
        )
        (base_run, head_run), _, _ = measure_sides(
            sides, selection, device=device, budget=budget, observer=observer,
            thresholds_for=lambda *_: (thresholds, {}),
        )  # fmt: skip
        paths = _write(out_dir, base_run, head_run)
        ab = judge_ab(base_run, head_run, thresholds, budget)
        if not head.settings.inject_slowdown:  # a canary's cost is no operator's
            ab = with_attribution(
                ab, (sides[0].config, sides[1].config), (base_run, head_run), selection,
                device=device,
            )  # fmt: skip
    return _note_new(_merge(verdict, ab, base_ref, paths), new, base_ref)


def _note_new(verdict: CompareVerdict, new: Sequence[str], base_ref: str) -> CompareVerdict:
    """Workloads the base ref does not define (added by the change) cannot be compared: said
    in a note, and they keep their "no baseline" status."""
    if not new:
        return verdict
    note = (
        f"{', '.join(sorted(new))}: not defined at {base_ref}, so there is no base to measure "
        "against (a workload this change adds)"
    )
    return replace(verdict, notes=[*verdict.notes, note])


def measure_sides(
    sides: Sequence[Side],
    selection: Selection,
    *,
    device: str,
    budget: ABBudget,
    observer: InterleaveObserver | None,
    thresholds_for: ThresholdSource = as_configured,
) -> tuple[list[RunResult], Thresholds, dict[str, str]]:
    """Plan each side from its own configuration, measure them interleaved until the
    sequential judge decides each workload (or the budget ends it): one run each, and the
    thresholds the judge used (``thresholds_for`` of the base side's) with their notes."""
    planned = [
        prepare(side.config, replace(selection, repeats=budget.max_rounds)) for side in sides
    ]
    settings = planned[0][1]  # the base side's settings govern both
    device = resolve_device(device)
    with warm_launcher(planned[0][0], settings, device) as launcher:
        environment = run_fingerprint([p for plan, _ in planned for p in plan], settings, device)
        arms = [
            Arm(
                label=side.label,
                plan=plan,
                settings=replace(settings, inject_slowdown=side.inject_slowdown),
            )
            for side, (plan, _) in zip(sides, planned, strict=True)
        ]
        thresholds, notes = thresholds_for(
            sides[0].config.thresholds,
            [(p.definition.name, p.definition_hash) for p in planned[0][0]],
            environment,
        )
        started = utc_now()
        judge = SequentialJudge(thresholds, len(planned[0][0]), budget.max_rounds)
        measured = run_interleaved(
            arms,
            device,
            environment,
            rounds=budget.max_rounds,
            budget_s=budget.budget_s,
            observer=observer,
            judge=judge,
            launcher=launcher,
        )
    finished = utc_now()
    runs = [
        _run_result(
            side, arm.settings, workloads, selection, device, environment, started, finished
        )
        for side, arm, workloads in zip(sides, arms, measured, strict=True)
    ]
    return runs, thresholds, notes


def judge_ab(
    base: RunResult, head: RunResult, thresholds: Thresholds, budget: ABBudget
) -> CompareVerdict:
    """The verdict of an interleaved pair, with the base side's thresholds (same machine,
    same job: only the code differs, so the fingerprint is shared)."""
    for side, run in (("base", base), ("head", head)):
        failed = [w for w in run.workloads if w.status != "ok"]
        if failed:
            names = "; ".join(f"{w.name} ({w.status}: {last_line(w.error)})" for w in failed)
            raise InfrastructureError(
                f"{side} workloads did not run: {names}", f"fix the {side} revision or re-run"
            )
    return judge_interleaved(base, head, thresholds, budget.max_rounds)


def with_workload_notes(verdict: CompareVerdict, notes: Mapping[str, str]) -> CompareVerdict:
    """``notes`` (workload → sentence) appended to the named workloads' notes."""
    if not notes:
        return verdict
    workloads = [
        replace(w, notes=[*w.notes, notes[w.name]]) if w.name in notes else w
        for w in verdict.workloads
    ]
    return replace(verdict, workloads=workloads)


def _flagged(workload: WorkloadVerdict) -> bool:
    """Anything but a clean "no change" is re-measured: a regression must be confirmed before
    it fails a pull request, an improvement before it is reported, an inconclusive or
    disturbed comparison is what the A/B exists to settle, and a workload without a baseline
    (the first pull request) is judged against the base ref measured here."""
    return workload.status in ("loss_mismatch", "no_baseline", "definition_changed") or any(
        c.verdict in ("regression", "improvement", "inconclusive")
        for c in workload.comparisons
        if c.derived_from is None
    )


def _merge(
    verdict: CompareVerdict, ab: CompareVerdict, base_ref: str, paths: tuple[Path, Path]
) -> CompareVerdict:
    confirmed = {w.name: w for w in ab.workloads}
    merged = []
    for workload in verdict.workloads:
        replacement = confirmed.get(workload.name)
        if replacement is None:
            merged.append(workload)
            continue
        said = sorted({c.verdict for c in workload.comparisons if c.verdict != "no_change"})
        rounds = min((c.head_repeats for c in replacement.comparisons), default=0)
        if workload.status == "no_baseline":
            note = (
                f"no stored or committed baseline yet: judged by an interleaved A/B of "
                f"{base_ref} against this head ({rounds} rounds) measured in this job"
            )
        elif workload.status == "definition_changed":
            note = (
                f"its definition changed at head: judged by an interleaved A/B of {base_ref} "
                f"against this head ({rounds} rounds) measured in this job"
            )
        else:
            note = (
                f"re-measured as an interleaved A/B against {base_ref} ({rounds} rounds) because "
                f"the baseline comparison said {' and '.join(said) or workload.status}; this is "
                "the verdict"
            )
        merged.append(replace(replacement, notes=[note, *replacement.notes]))
    all_confirmed = all(
        w.name in confirmed
        for w in verdict.workloads
        if w.comparisons or w.status in ("no_baseline", "definition_changed")
    )
    return replace(
        verdict,
        workloads=merged,
        overall=overall_verdict(merged),
        method="interleaved" if all_confirmed else verdict.method,
        notes=[
            *verdict.notes,
            f"confirmed {', '.join(sorted(confirmed))} by interleaved A/B against {base_ref}; "
            f"documents: {paths[0]}, {paths[1]}",
        ],
    )


def _check_head_checkout(repo: Path, head: RunResult) -> None:
    """The working tree must be the revision the head result measured, or A/B judges other code."""
    current = resolve_commit(repo, "HEAD")
    measured = head.source.commit
    if measured and measured != current:
        raise UsageError(
            f"the head result was measured at commit {measured[:12]} but the checkout is at "
            f"{current[:12]}",
            "check out the measured commit, or re-run perfgate run before compare --confirm",
        )


def _side(config: Config, repo: Path, checkout: Checkout, label: str) -> Side:
    source = collect_source(checkout.path, os.environ)
    # In CI the variables describe the pull request, not this worktree's commit.
    source = replace(source, commit=checkout.commit, branch=checkout.ref, dirty=False)
    return Side(label=label, config=config_in_checkout(config, repo, checkout.path), source=source)


def config_in_checkout(config: Config, repo: Path, checkout: Path) -> Config:
    """The same configuration file (or the same folder, without one) in another checkout."""
    anchor = config.source if config.source is not None else config.root / "pyproject.toml"
    try:
        relative = anchor.resolve().relative_to(repo.resolve())
    except ValueError:
        raise UsageError(
            f"the configuration {anchor} is outside the repository {repo}",
            "run compare --ab from inside the repository whose refs you compare",
        ) from None
    candidate = checkout / relative
    if config.source is not None and candidate.is_file():
        return load_config(candidate)
    return load_config(None, cwd=candidate.parent)


def _run_result(
    side: Side,
    settings: RunSettings,
    workloads: list[WorkloadResult],
    selection: Selection,
    device: str,
    environment: dict[str, object],
    started: str,
    finished: str,
) -> RunResult:
    return RunResult(
        run_id=str(uuid.uuid4()),
        perfgate_version=__version__,
        started_at=started,
        finished_at=finished,
        suite=None if selection.workloads else (selection.suite or side.config.suite),
        device=device,
        settings=settings,
        source=side.source,
        environment=dict(environment),
        workloads=workloads,
    )


def _write(out_dir: Path, base: RunResult, head: RunResult) -> tuple[Path, Path]:
    """Both documents, written before anything is judged: a later failure loses no data."""
    base_path, head_path = out_dir / "base.json", out_dir / "head.json"
    write_result(base_path, base)
    write_result(head_path, head)
    return base_path, head_path
