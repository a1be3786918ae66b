"""The history a report draws: each head workload's metric over the last runs on its branch.

A point is one stored run of the same baseline series as the head workload (same suite,
definition, knobs, environment and branch, so the line never mixes incomparable runs), with the
runs of the live baseline window and the recorded change points marked. This module only loads;
drawing is ``perfgate.report.charts`` and layout the HTML template. Database imports stay inside
:func:`load_histories`, so rendering a report without a database needs none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.result import RunResult
from perfgate.telemetry.fingerprint import fingerprint_key

DEFAULT_HISTORY_RUNS = 100
"""Runs per workload drawn by default: a few months of nightlies, still a readable line."""


@dataclass(frozen=True, kw_only=True)
class HistoryRun:
    """One stored run of the head workload's series."""

    run_id: str
    commit: str | None
    started_at: str
    medians: Mapping[str, float | None]
    """Metric → median over the run's repeats."""
    in_baseline: bool = False
    """The live baseline was built from this run."""
    change_point_metrics: frozenset[str] = frozenset()
    """Metrics whose recorded step change starts at this run."""


@dataclass(frozen=True, kw_only=True)
class WorkloadHistory:
    """The series of one head workload, oldest run first."""

    runs: list[HistoryRun] = field(default_factory=list)
    baseline_reason: str | None = None
    """Why the live baseline was set (first baseline, change point at a commit, …)."""
    baseline_created_at: str | None = None


def load_histories(
    url: str,
    root: Path,
    results: list[RunResult],
    *,
    branch: str | None = None,
    max_runs: int = DEFAULT_HISTORY_RUNS,
) -> dict[str, WorkloadHistory]:
    """Workload name → its history on ``branch`` (default: each head run's own branch).

    A run without a branch has no series to draw. The newest ``max_runs`` runs of each series
    are kept; the database is read, never written.
    """
    from sqlmodel import Session

    from perfgate.documents.snapshot import baseline_key
    from perfgate.store.engine import make_engine
    from perfgate.store.history import (
        baseline_members,
        live_baseline,
        load_history,
        recorded_change_points,
    )

    engine = make_engine(url, root)
    histories: dict[str, WorkloadHistory] = {}
    try:
        with Session(engine) as session:
            for result in results:
                on_branch = branch or result.source.branch
                if not on_branch:
                    continue
                series = load_history(session, on_branch, max_runs=max(max_runs * 4, 500))
                env_key = fingerprint_key(result.environment)
                for workload in result.workloads:
                    key = baseline_key(
                        result.suite, workload.definition_hash, workload.knobs, env_key, on_branch
                    )
                    points = series.get(key, [])[-max_runs:]
                    baseline = live_baseline(session, key)
                    used = set()
                    if baseline is not None and baseline.id is not None:
                        used = {m.run_id for m in baseline_members(session, baseline.id) if m.used}
                    steps = recorded_change_points(session, key)
                    histories[workload.name] = WorkloadHistory(
                        runs=[
                            HistoryRun(
                                run_id=point.run_id,
                                commit=point.commit,
                                started_at=point.started_at,
                                medians={m: v[0] for m, v in point.metrics.items()},
                                in_baseline=point.run_id in used,
                                change_point_metrics=frozenset(
                                    metric for metric, after in steps if after == point.run_id
                                ),
                            )
                            for point in points
                        ],
                        baseline_reason=baseline.reason if baseline is not None else None,
                        baseline_created_at=baseline.created_at if baseline else None,
                    )
    finally:
        engine.dispose()
    return histories
