"""``perfgate baseline refresh``: move a baseline only after a confirmed step.

For every key (suite, definition hash, knobs, environment, branch) the history of the gated metric
(median step time per run) is split at change points found deterministically, with a minimum
segment length so a single spike never moves a baseline. The baseline is built from the newest
stable segment, leaving out its last ``min_segment - 1`` runs (a step there is not confirmed yet)
when the segment is long enough, using at most ``window`` runs and dropping outliers beyond
``outlier_mads`` robust deviations. A live baseline is replaced only when that changes something
that matters: there was none, a new change point moved the segment, or the window has filled up
with more runs than it was built from. Replaced baselines are retired, never edited.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from perfgate.documents.refresh import KeyRefresh, RefreshAction, RefreshReport, RefreshStep
from perfgate.stats.changepoints import ChangePoint, find_change_points, newest_stable_segment
from perfgate.store.history import (
    HistoryPoint,
    baseline_members,
    live_baseline,
    load_history,
    recorded_change_points,
    save_baseline,
)
from perfgate.store.serialised import serialised
from perfgate.store.tables import BaselineRow, ChangePointRow

GATED_METRIC = "step_time_s"


@dataclass(frozen=True, kw_only=True)
class RefreshPolicy:
    """How baselines are built from history."""

    window: int = 10
    """At most this many runs form a baseline (the newest of the stable segment)."""
    min_segment: int = 5
    """Fewest runs on each side of a change point: a shorter blip is noise, not a step."""
    min_runs: int = 3
    """Fewest runs a baseline is built from."""
    outlier_mads: float = 5.0
    """Runs further than this many robust deviations (1.4826·MAD) from the median are dropped."""


def refresh_baselines(
    engine: Engine, branch: str, policy: RefreshPolicy | None = None
) -> RefreshReport:
    """Refresh every key with history on ``branch``; one transaction for the whole refresh.

    Refreshes of one branch run one after the other (``serialised``): a second refresh started
    at the same moment reads what the first one wrote and finds nothing left to move, instead
    of adding a second live baseline (issue 16). A refresh that loses a race anyway is run again
    from the start, reading history, live baselines and change points afresh.
    """
    policy = policy or RefreshPolicy()

    def refresh(session: Session) -> RefreshReport:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        history = load_history(session, branch)
        keys = [
            _refresh_key(session, key, branch, points, policy, now)
            for key, points in sorted(history.items())
        ]
        return RefreshReport(branch=branch, refreshed_at=now, keys=keys)

    return serialised(engine, f"baseline refresh of {branch}", refresh)


def _refresh_key(
    session: Session,
    key: str,
    branch: str,
    points: list[HistoryPoint],
    policy: RefreshPolicy,
    now: str,
) -> KeyRefresh:
    points = [p for p in points if p.metrics.get(GATED_METRIC, (None, []))[0] is not None]
    values = [float(p.metrics[GATED_METRIC][0] or 0.0) for p in points]
    first = points[0] if points else None
    change_points = find_change_points(values, min_segment=policy.min_segment) if values else []
    new_steps = _record_change_points(session, key, points, change_points, now)
    start, end = newest_stable_segment(values, change_points) if values else (0, 0)
    window = _window(points[start:end], policy)
    outcome = KeyRefresh(
        key=key,
        workload=first.workload if first else "?",
        suite=first.suite if first else None,
        runs_in_history=len(points),
        change_points=_steps(points, change_points, new_steps),
        action="insufficient",
        reason=f"{len(window)} stable runs, {policy.min_runs} needed",
    )
    if len(window) < policy.min_runs:
        return outcome
    used = _inliers(window, policy.outlier_mads)
    live = live_baseline(session, key)
    reason = _reason_to_move(session, live, used, new_steps)
    if reason is None:
        assert live is not None
        return replace(
            outcome, action="unchanged", reason="no confirmed change", baseline_id=live.id
        )
    used_ids = {p.workload_result_id for p in used}
    baseline = save_baseline(
        session,
        _baseline_row(key, branch, window, used, policy, reason, now),
        [(p.workload_result_id, p.run_id, p.workload_result_id in used_ids) for p in window],
        replacing=live,
        retired_at=now,
    )
    action: RefreshAction = "created" if live is None else "moved"
    return replace(outcome, action=action, reason=reason, baseline_id=baseline.id)


def _steps(
    points: Sequence[HistoryPoint],
    change_points: Sequence[ChangePoint],
    new_steps: Sequence[ChangePointRow],
) -> list[RefreshStep]:
    """The change points with the runs and commits on either side, new ones marked."""
    new_after = {row.run_after for row in new_steps}
    steps = []
    for point in change_points:
        before, after = points[point.index - 1], points[point.index]
        steps.append(
            RefreshStep(
                index=point.index,
                metric=GATED_METRIC,
                median_before=point.median_before,
                median_after=point.median_after,
                run_before=before.run_id,
                run_after=after.run_id,
                commit_before=before.commit,
                commit_after=after.commit,
                new=after.run_id in new_after,
            )
        )
    return steps


def _window(segment: Sequence[HistoryPoint], policy: RefreshPolicy) -> list[HistoryPoint]:
    """The newest runs of the segment, without an unconfirmed tail when the segment allows."""
    unconfirmed = policy.min_segment - 1
    usable = list(segment)
    if len(usable) - unconfirmed >= policy.min_runs:
        usable = usable[: len(usable) - unconfirmed]
    return usable[-policy.window :]


def _inliers(window: Sequence[HistoryPoint], outlier_mads: float) -> list[HistoryPoint]:
    """Runs within ``outlier_mads`` robust deviations of the window's median."""
    values = [float(p.metrics[GATED_METRIC][0] or 0.0) for p in window]
    median = statistics.median(values)
    spread = 1.4826 * statistics.median(abs(v - median) for v in values)
    if spread == 0:
        return list(window)
    return [
        p for p, v in zip(window, values, strict=True) if abs(v - median) <= outlier_mads * spread
    ]


def _reason_to_move(
    session: Session,
    live: BaselineRow | None,
    used: Sequence[HistoryPoint],
    new_steps: Sequence[ChangePointRow],
) -> str | None:
    """Why the live baseline must be replaced, or None to keep it."""
    if live is None:
        return f"first baseline for this key ({len(used)} runs)"
    assert live.id is not None
    live_ids = {m.workload_result_id for m in baseline_members(session, live.id) if m.used}
    used_ids = {p.workload_result_id for p in used}
    if used_ids == live_ids:
        return None
    if new_steps:
        step = new_steps[-1]
        change = step.median_after / step.median_before - 1
        return (
            f"change point: step time {change:+.1%} from commit {step.commit_before or '?'} "
            f"to {step.commit_after or '?'}"
        )
    if not live_ids & used_ids:
        return "the live baseline's runs left the newest stable segment"
    if len(used_ids) > len(live_ids):
        return f"window filled: {len(live_ids)} → {len(used_ids)} runs"
    return None


def _record_change_points(
    session: Session,
    key: str,
    points: Sequence[HistoryPoint],
    change_points: Sequence[ChangePoint],
    now: str,
) -> list[ChangePointRow]:
    """Store change points not recorded before; returns the new ones."""
    known = recorded_change_points(session, key)
    added = []
    for point in change_points:
        before, after = points[point.index - 1], points[point.index]
        if (GATED_METRIC, after.run_id) in known:
            continue
        row = ChangePointRow(
            key=key,
            metric=GATED_METRIC,
            run_before=before.run_id,
            commit_before=before.commit,
            run_after=after.run_id,
            commit_after=after.commit,
            median_before=point.median_before,
            median_after=point.median_after,
            detected_at=now,
        )
        session.add(row)
        added.append(row)
    return added


def _baseline_row(
    key: str,
    branch: str,
    window: Sequence[HistoryPoint],
    used: Sequence[HistoryPoint],
    policy: RefreshPolicy,
    reason: str,
    now: str,
) -> BaselineRow:
    newest = used[-1]
    return BaselineRow(
        key=key,
        suite=newest.suite,
        workload=newest.workload,
        definition_hash=newest.definition_hash,
        knobs=newest.knobs,
        environment_key=newest.environment_key,
        branch=branch,
        created_at=now,
        reason=reason,
        method={
            "metric": GATED_METRIC,
            "window": policy.window,
            "min_segment": policy.min_segment,
            "min_runs": policy.min_runs,
            "outlier_rule": f"|x - median| > {policy.outlier_mads:g} x 1.4826 MAD",
            "runs_considered": len(window),
            "outliers_dropped": len(window) - len(used),
            "first_run": window[0].run_id,
            "last_run": window[-1].run_id,
        },
        metrics=metric_statistics(used),
    )


def metric_statistics(points: Sequence[HistoryPoint]) -> dict[str, dict[str, Any]]:
    """Per metric: median of run medians, the run medians and the pooled per-repeat values.

    The per-repeat values keep the statistical unit (the repeat) for compare; no step-level data.
    """
    names = sorted({name for p in points for name in p.metrics})
    stats: dict[str, dict[str, Any]] = {}
    for name in names:
        run_medians = [
            value for p in points if (value := p.metrics.get(name, (None, []))[0]) is not None
        ]
        repeats = [v for p in points for v in p.metrics.get(name, (None, []))[1]]
        if not run_medians:
            continue
        stats[name] = {
            "median": statistics.median(run_medians),
            "run_medians": run_medians,
            "repeat_values": repeats,
            "runs": len(run_medians),
            "repeats": len(repeats),
        }
    return stats
