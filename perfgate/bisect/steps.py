"""``perfgate bisect-steps REFRESH.json``: explain the slowdowns a baseline refresh found.

The nightly job stores tonight's run, refreshes the baselines and writes the refresh document;
every change point that refresh recorded for the first time where step time grew is a range
of commits (from the last run before the step to the first run after it) that holds its cause.
Each such range is bisected with the same interleaved A/B probes as ``perfgate bisect``,
measuring only the workload whose history stepped, in the suite it was measured in.

A step between two runs of the same commit is not a code change (the machine or its drivers
moved), and a step whose runs recorded no commit cannot be searched: both are reported, not
bisected. At most ``max_steps`` ranges are searched a night, the largest steps first, so a
night that moved every baseline at once (a new runner) does not bisect until morning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from perfgate.bisect.session import BisectRequest, bisect_session
from perfgate.compare.session import RoundWatch
from perfgate.documents.bisect import ExplainedStep
from perfgate.documents.refresh import REFRESH, KeyRefresh, RefreshStep
from perfgate.errors import UsageError
from perfgate.files import check_writable
from perfgate.names import check_name, confined
from perfgate.runner.plan import Selection

_COMMIT = re.compile(r"[0-9a-f]{7,64}")
"""A commit id as the store records it: never an option or a ref expression handed to git."""


@dataclass(frozen=True, kw_only=True)
class StepsRequest:
    """Which refresh to explain and the limits of each bisection's probes."""

    refresh: Path
    """A refresh document (``perfgate baseline refresh --json``)."""
    out_dir: Path
    """Folder for every bisection's document and its probes' result documents."""
    config: Path | None = None
    device: str | None = None
    rounds: int | None = None
    budget_s: float | None = None
    steps: int | None = None
    warmup: int | None = None
    max_steps: int = 3
    """Bisect at most this many new steps, the largest first."""


@dataclass(frozen=True, kw_only=True)
class StepsOutcome:
    """The refreshed branch and every new slowdown of its refresh, explained or skipped."""

    branch: str
    explained: list[ExplainedStep]


def bisect_steps(request: StepsRequest, progress: RoundWatch) -> StepsOutcome:
    """Bisect every new slowdown of the refresh (the largest ``max_steps``); one entry each."""
    if request.max_steps < 0:
        raise UsageError(f"--max-steps {request.max_steps} is negative", "give 0 or more")
    report = REFRESH.load(request.refresh, "refresh file")
    check_writable(request.out_dir / "bisect.json", "--out-dir")
    found = sorted(report.new_slowdowns(), key=lambda pair: -pair[1].relative_change)
    explained = []
    for number, (key, step) in enumerate(found):
        reason = _unsearchable(step) or (
            f"not searched: only the {request.max_steps} largest new steps are bisected a "
            "night (--max-steps)"
            if number >= request.max_steps
            else None
        )
        entry = ExplainedStep(workload=key.workload, suite=key.suite, step=step, skipped=reason)
        explained.append(entry if reason else _bisected(entry, key, request, progress))
    return StepsOutcome(branch=report.branch, explained=explained)


def _unsearchable(step: RefreshStep) -> str | None:
    if step.commit_before is None or step.commit_after is None:
        return "not searched: a run beside the step recorded no commit"
    if not (_COMMIT.fullmatch(step.commit_before) and _COMMIT.fullmatch(step.commit_after)):
        return "not searched: a run beside the step recorded no commit id git can check out"
    if step.commit_before == step.commit_after:
        return (
            "not searched: both runs beside the step measured the same commit, so the code did "
            "not change; the machine, its drivers or its load did"
        )
    return None


def _bisected(
    entry: ExplainedStep, key: KeyRefresh, request: StepsRequest, progress: RoundWatch
) -> ExplainedStep:
    step = entry.step
    assert step.commit_before is not None and step.commit_after is not None
    workload = check_name(key.workload, "workload", str(request.refresh))
    name = f"{workload}-{step.commit_after[:12]}"
    document = confined(request.out_dir, f"{name}.json")
    bisect = BisectRequest(
        good=step.commit_before,
        bad=step.commit_after,
        config=request.config,
        selection=Selection(
            suite=key.suite, workloads=[workload], steps=request.steps, warmup=request.warmup
        ),
        device=request.device,
        rounds=request.rounds,
        budget_s=request.budget_s,
        out_dir=confined(request.out_dir, name),
        json_out=document,
    )
    try:
        found = bisect_session(bisect, progress)
    except UsageError as error:  # the range is not searchable (history rewritten, a merge)
        return replace(entry, skipped=f"not searched: {error.problem}")
    return replace(entry, bisect=found, document=str(document))


def culprits(explained: Sequence[ExplainedStep]) -> list[ExplainedStep]:
    """The steps whose bisection named a commit."""
    return [e for e in explained if e.bisect is not None and e.bisect.conclusion == "found"]
