"""The report's history, loaded from the database: each head workload's series on its branch.

Loading only: the types are ``perfgate.documents.history``, drawing is ``perfgate.report``. This
module lives with the store so that the report never opens a database, and rendering a report
without one imports none of the database stack (the callers import this module only when a
history is asked for).
"""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from perfgate.documents.history import DEFAULT_HISTORY_RUNS, HistoryRun, WorkloadHistory
from perfgate.documents.result import RunResult
from perfgate.documents.snapshot import baseline_key
from perfgate.store.engine import database_exists, make_engine, masked_url
from perfgate.store.history import (
    baseline_members,
    live_baseline,
    load_history,
    recorded_change_points,
)
from perfgate.telemetry.fingerprint import fingerprint_key


def stored_histories(
    url: str, root: Path, heads: list[RunResult], branch: str | None, runs: int
) -> tuple[dict[str, WorkloadHistory], str]:
    """Histories from the database, or none and why (no database yet is normal at first)."""
    if not database_exists(url, root):
        return {}, f"No history: the database {masked_url(url)} does not exist yet."
    if branch is None and not any(head.source.branch for head in heads):
        return {}, "No history: the run records no git branch (run in a checkout, or --branch)."
    return load_histories(url, root, heads, branch=branch, max_runs=runs), ""


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
