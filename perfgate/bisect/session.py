"""``perfgate bisect GOOD BAD`` as a library call: the commit that made training slower.

Every probe is the sequential interleaved A/B of ``compare --ab`` (both commits checked out as
worktrees, measured alternately round by round until the interval decides or the rounds run
out), so the machine's drift lands on both sides of every probe; the search
(``perfgate.bisect.search``) turns the probes into the culprit, or the narrowest range they
prove. The caller's configuration governs thresholds, rounds and budgets: bisecting is a
developer's or the nightly job's tool, not a pull request's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfgate.bisect.search import bisect_range
from perfgate.compare.ab import ABOutcome, compare_refs, config_in_checkout
from perfgate.compare.attribution import with_attribution
from perfgate.compare.sequential import ab_budget
from perfgate.compare.session import RoundWatch, default_ab_folder
from perfgate.compare.worktrees import (
    checked_out,
    commit_subject,
    first_parent_range,
    repository_root,
)
from perfgate.config import Config, load_config
from perfgate.documents.bisect import BISECT, BisectProbe, BisectReport, ProbeState
from perfgate.documents.verdict import CompareVerdict, WorkloadVerdict
from perfgate.files import check_writable, write_json_atomic
from perfgate.runner.device import resolve_device
from perfgate.runner.plan import Selection

PRIMARY = "step_time_s"


@dataclass(frozen=True, kw_only=True)
class BisectRequest:
    """What ``perfgate bisect`` is asked: the range, what to measure, and the limits of each
    probe (``rounds`` and ``budget_s`` are per A/B, as for ``compare --ab``)."""

    good: str
    bad: str
    config: Path | None = None
    selection: Selection = field(default_factory=Selection)
    device: str | None = None
    rounds: int | None = None
    budget_s: float | None = None
    out_dir: Path | None = None
    """Folder for every probe's result documents (default: .perfgate/ab/<UTC time>)."""
    json_out: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Probed:
    """A probe as the search reads it, with the A/B it came from."""

    probe: BisectProbe
    outcome: ABOutcome

    @property
    def verdict(self) -> CompareVerdict:
        return self.outcome.verdict

    @property
    def state(self) -> ProbeState:
        return self.probe.state


def bisect_session(request: BisectRequest, progress: RoundWatch = nullcontext) -> BisectReport:
    """Bisect ``good..bad``; the report, also written to ``json_out`` when given."""
    settings = load_config(request.config)
    if request.json_out is not None:
        check_writable(request.json_out, "--json")  # before minutes of measuring
    repo = repository_root(settings.root)
    commits = first_parent_range(repo, request.good, request.bad)
    device = resolve_device(request.device or settings.device)
    budget = ab_budget(settings, device, rounds=request.rounds, budget_s=request.budget_s)
    out_dir = request.out_dir or default_ab_folder(settings.root)
    with progress() as observer:

        def probe(base: int, head: int) -> Probed:
            started = time.monotonic()
            outcome = compare_refs(
                settings,
                request.selection,
                commits[base],
                commits[head],
                device=device,
                budget=budget,
                out_dir=out_dir / f"{base:03d}-{head:03d}",
                observer=observer,
                attribute=False,  # only the culprit's own A/B is attributed, below
            )
            read = read_probe(outcome.verdict, commits[base], commits[head])
            return Probed(probe=replace(read, seconds=time.monotonic() - started), outcome=outcome)

        search = bisect_range(len(commits), probe)
    effect = search.effect
    found = search.conclusion == "found" and effect is not None
    if found and effect is not None:
        effect = attributed(effect, settings, repo, request.selection, device)
    culprit = commits[search.first_bad]
    decided = deciding_workload(effect) if found and effect is not None else None
    report = BisectReport(
        good=commits[0],
        bad=commits[-1],
        commits=commits,
        workloads=sorted({w.name for _, _, p in search.probes for w in p.verdict.workloads}),
        conclusion=search.conclusion,
        first_bad=None if search.conclusion == "no_regression" else culprit,
        last_good=None if search.conclusion == "no_regression" else commits[search.last_good],
        culprit_subject=commit_subject(repo, culprit) if found else None,
        effect=effect.probe if found and effect is not None else None,
        work_changes=list(decided.work_changes) if decided is not None else [],
        attribution=decided.attribution if decided is not None else None,
        probes=[p.probe for _, _, p in search.probes],
        notes=_notes(search.conclusion, commits, search.last_good, search.first_bad),
    )
    if request.json_out is not None:
        write_json_atomic(request.json_out, BISECT.dump(report), option="--json")
    return report


def attributed(
    effect: Probed, settings: Config, repo: Path, selection: Selection, device: str
) -> Probed:
    """The culprit's A/B with its deciding workload attributed per operator and kernel, each
    side profiled in its own checkout."""
    with checked_out(repo, [effect.probe.base, effect.probe.head]) as (base, head):
        configs = (
            config_in_checkout(settings, repo, base.path),
            config_in_checkout(settings, repo, head.path),
        )
        verdict = with_attribution(
            effect.verdict,
            configs,
            (effect.outcome.base, effect.outcome.head),
            selection,
            device=device,
            names=[effect.probe.workload] if effect.probe.workload else [],
        )
    return replace(effect, outcome=replace(effect.outcome, verdict=verdict))


def read_probe(verdict: CompareVerdict, base: str, head: str) -> BisectProbe:
    """A probe's state from its verdict's step-time comparisons: regressed when any workload
    regressed (the worst one decides), unchanged when every one was decided within the
    threshold or faster, inconclusive otherwise."""
    judged = [
        (w.name, c)
        for w in verdict.workloads
        for c in w.comparisons
        if c.metric == PRIMARY and c.derived_from is None
    ]
    if not judged:
        return BisectProbe(base=base, head=head, state="inconclusive", workload=None)
    regressed = [pair for pair in judged if pair[1].verdict == "regression"]
    undecided = [pair for pair in judged if pair[1].verdict == "inconclusive"]
    state: ProbeState
    if regressed:
        state, chosen = "regressed", regressed
    elif undecided:
        state, chosen = "inconclusive", undecided
    else:
        state, chosen = "unchanged", judged
    name, comparison = max(chosen, key=lambda pair: pair[1].ratio)
    return BisectProbe(
        base=base,
        head=head,
        state=state,
        workload=name,
        ratio=comparison.ratio,
        ci_low=comparison.ci_low,
        ci_high=comparison.ci_high,
        rounds=comparison.head_repeats,
    )


def deciding_workload(effect: Probed) -> WorkloadVerdict | None:
    """The culprit's A/B verdict of the workload that decided it."""
    for workload in effect.verdict.workloads:
        if workload.name == effect.probe.workload:
            return workload
    return None


def _notes(conclusion: str, commits: Sequence[str], last_good: int, first_bad: int) -> list[str]:
    if conclusion == "no_regression":
        return [f"{commits[0][:12]} against {commits[-1][:12]}: no regression to bisect"]
    if conclusion == "narrowed":
        between = first_bad - last_good
        return [
            f"the probes could place the change no closer than the {between} commit(s) after "
            f"{commits[last_good][:12]} up to {commits[first_bad][:12]}: it is near the "
            "threshold, or spread over several commits; more rounds (--rounds) may decide"
        ]
    return []
