"""History and baseline persistence: the queries baseline refresh, show and export need.

Persistence only: which runs form a baseline, and when a baseline moves, is decided in
``perfgate.baseline``; this module loads what was measured and records what was decided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from perfgate.documents.base import build
from perfgate.documents.snapshot import MetricStatistics, baseline_key
from perfgate.store.serialised import StaleRead
from perfgate.store.tables import (
    BaselineRow,
    BaselineRunRow,
    ChangePointRow,
    EnvironmentRow,
    MetricSummaryRow,
    RunRow,
    WorkloadResultRow,
)


@dataclass(frozen=True, kw_only=True)
class HistoryPoint:
    """One successful workload result on a branch, with its per-metric summaries."""

    run_id: str
    commit: str | None
    started_at: str
    workload_result_id: int
    suite: str | None
    workload: str
    definition_hash: str
    knobs: dict[str, Any]
    environment_key: str
    metrics: dict[str, tuple[float | None, list[float]]] = field(default_factory=dict)
    """Metric name → (median over repeats, per-repeat values)."""


def load_history(
    session: Session, branch: str, max_runs: int = 500
) -> dict[str, list[HistoryPoint]]:
    """Successful workload results of the newest ``max_runs`` runs on ``branch``, grouped by
    baseline key, oldest first.

    Canary runs (deliberately slowed) never enter a baseline series.
    """
    newest = (
        select(RunRow.id)
        .where(RunRow.branch == branch)
        .order_by(col(RunRow.started_at).desc())
        .limit(max_runs)
    )
    rows = session.exec(
        select(RunRow, WorkloadResultRow)
        .where(RunRow.id == WorkloadResultRow.run_id)
        .where(col(RunRow.id).in_(newest))
        .where(WorkloadResultRow.status == "ok")
        .order_by(col(RunRow.started_at), col(RunRow.id), col(WorkloadResultRow.name))
    ).all()
    summaries = _metric_summaries(session, [w.id for _, w in rows if w.id is not None])
    series: dict[str, list[HistoryPoint]] = {}
    for run, workload in rows:
        if (run.settings or {}).get("inject_slowdown"):
            continue
        assert workload.id is not None
        point = HistoryPoint(
            run_id=run.id,
            commit=run.commit,
            started_at=run.started_at,
            workload_result_id=workload.id,
            suite=run.suite,
            workload=workload.name,
            definition_hash=workload.definition_hash,
            knobs=workload.knobs,
            environment_key=run.environment_key,
            metrics=summaries.get(workload.id, {}),
        )
        key = baseline_key(
            point.suite, point.definition_hash, point.knobs, point.environment_key, branch
        )
        series.setdefault(key, []).append(point)
    return series


def _metric_summaries(
    session: Session, workload_result_ids: Sequence[int]
) -> dict[int, dict[str, tuple[float | None, list[float]]]]:
    found: dict[int, dict[str, tuple[float | None, list[float]]]] = {}
    for start in range(0, len(workload_result_ids), 500):  # stay under bound-parameter limits
        chunk = workload_result_ids[start : start + 500]
        rows = session.exec(
            select(MetricSummaryRow).where(col(MetricSummaryRow.workload_result_id).in_(chunk))
        ).all()
        for row in rows:
            found.setdefault(row.workload_result_id, {})[row.metric] = (
                row.median,
                list(row.repeat_values),
            )
    return found


def live_baseline(session: Session, key: str) -> BaselineRow | None:
    """The live baseline of ``key``, if any (never two: ``uq_baselines_live_key``)."""
    return session.exec(
        select(BaselineRow).where(BaselineRow.key == key).where(BaselineRow.status == "live")
    ).first()


def baseline_members(session: Session, baseline_id: int) -> list[BaselineRunRow]:
    """The workload results a baseline was built from (used and dropped)."""
    return list(
        session.exec(select(BaselineRunRow).where(BaselineRunRow.baseline_id == baseline_id)).all()
    )


def recorded_change_points(session: Session, key: str) -> set[tuple[str, str]]:
    """(metric, run after the step) of every change point already recorded for ``key``."""
    rows = session.exec(select(ChangePointRow).where(ChangePointRow.key == key)).all()
    return {(row.metric, row.run_after) for row in rows}


def save_baseline(
    session: Session,
    baseline: BaselineRow,
    members: Sequence[tuple[int, str, bool]],
    replacing: BaselineRow | None,
    retired_at: str,
) -> BaselineRow:
    """Retire ``replacing``, the live baseline the caller decided against (kept for audit), and
    add ``baseline`` as the key's live one.

    ``members`` are (workload result id, run id, used) triples. Raises ``StaleRead`` when
    ``replacing`` is no longer live, and the flush raises ``IntegrityError`` when another live
    baseline of the key appeared since the caller read: either way another writer got in
    between, and the caller's transaction must be run again (``perfgate.store.serialised``),
    never left to overwrite a retirement or add a second live baseline. The caller commits, so
    the retirement and the new baseline land together or not at all.
    """
    if replacing is not None:
        retired = session.exec(
            update(BaselineRow)
            .where(col(BaselineRow.id) == replacing.id)
            .where(col(BaselineRow.status) == "live")
            .values(status="retired", retired_at=retired_at)
        )
        if retired.rowcount != 1:
            raise StaleRead(f"baseline {replacing.id} of key {replacing.key} is no longer live")
    session.add(baseline)
    session.flush()
    assert baseline.id is not None
    for workload_result_id, run_id, used in members:
        session.add(
            BaselineRunRow(
                baseline_id=baseline.id,
                workload_result_id=workload_result_id,
                run_id=run_id,
                used=used,
            )
        )
    return baseline


def list_baselines(
    session: Session, branch: str | None = None, include_retired: bool = False
) -> list[BaselineRow]:
    """Baselines, live only unless asked, ordered by workload then creation time."""
    query = select(BaselineRow)
    if branch is not None:
        query = query.where(BaselineRow.branch == branch)
    if not include_retired:
        query = query.where(BaselineRow.status == "live")
    return list(
        session.exec(query.order_by(col(BaselineRow.workload), col(BaselineRow.created_at))).all()
    )


def environment_fingerprint(session: Session, key: str) -> dict[str, Any] | None:
    """The stored fingerprint behind an environment key."""
    row = session.get(EnvironmentRow, key)
    return dict(row.fingerprint) if row is not None else None


def member_presets(session: Session, workload_result_ids: Sequence[int]) -> list[str]:
    """The distinct presets of these workload results, sorted (one for any real baseline: the
    preset is part of the definition hash that keys it)."""
    rows = session.exec(
        select(WorkloadResultRow.preset)
        .where(col(WorkloadResultRow.id).in_(list(workload_result_ids)))
        .distinct()
    ).all()
    return sorted(rows)


def runs_by_id(session: Session, run_ids: Sequence[str]) -> dict[str, RunRow]:
    """Runs by id (for commits and times in exports)."""
    rows = session.exec(select(RunRow).where(col(RunRow.id).in_(list(run_ids)))).all()
    return {row.id: row for row in rows}


def stored_metrics(metrics: Mapping[str, Any]) -> dict[str, MetricStatistics]:
    """A baseline row's metrics column (JSON, as ``perfgate.baseline.refresh`` stored it) as the
    snapshot's typed statistics."""
    return {name: build(MetricStatistics, stats) for name, stats in metrics.items()}
