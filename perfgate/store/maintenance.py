"""Keeping the database small: old runs lose their raw per-step arrays, not their numbers.

Raw step times, losses and loader waits are most of a database's size and are only needed to
recompute a statistic. Old runs keep their per-repeat medians, steady-state index, telemetry
summary and metric summaries, which is all history and baselines read. Samples behind a *live*
baseline are never pruned: a verdict against that baseline may still need to be re-derived.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import ColumnElement, Text, and_, cast, func, not_, or_, select, update
from sqlalchemy.engine import Connection
from sqlmodel import col

from perfgate.errors import UsageError
from perfgate.store.engine import make_engine, unavailable_on_error, write_transaction
from perfgate.store.tables import (
    BaselineRow,
    BaselineRunRow,
    RepeatSampleRow,
    RunRow,
    WorkloadResultRow,
)

RAW_COLUMNS = ("step_times_s", "losses", "dataloader_wait_s")


@dataclass(frozen=True, kw_only=True)
class PruneOutcome:
    """What ``prune_samples`` did."""

    pruned: int
    """Repeat-sample rows whose raw arrays were cleared."""
    kept_for_baselines: int
    """Old rows with raw data left intact because a live baseline was built from them."""


def prune_samples(
    url: str, root: Path, keep_days: int, *, now: datetime | None = None
) -> PruneOutcome:
    """Clear the raw arrays of repeats of runs started more than ``keep_days`` days ago."""
    if keep_days < 0:
        raise UsageError(
            f"--keep-days must be 0 or more, not {keep_days}", "pass the days of raw data to keep"
        )
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=keep_days)
    engine = make_engine(url, root)
    try:
        with unavailable_on_error(url), write_transaction(engine) as connection:
            return _prune(connection, _runs_started_before(connection, cutoff))
    finally:
        engine.dispose()


def _runs_started_before(connection: Connection, cutoff: datetime) -> list[str]:
    """Compared as datetimes in Python: ``started_at`` is ISO text with any UTC offset."""
    rows = connection.execute(select(col(RunRow.id), col(RunRow.started_at))).all()
    return [run_id for run_id, started in rows if _parse(started) < cutoff]


def _parse(timestamp: str) -> datetime:
    parsed = datetime.fromisoformat(timestamp)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _prune(connection: Connection, run_ids: Sequence[str]) -> PruneOutcome:
    if not run_ids:
        return PruneOutcome(pruned=0, kept_for_baselines=0)
    result_id = col(RepeatSampleRow.workload_result_id)
    old = result_id.in_(
        select(col(WorkloadResultRow.id)).where(col(WorkloadResultRow.run_id).in_(run_ids))
    )
    live = result_id.in_(
        select(col(BaselineRunRow.workload_result_id))
        .join(BaselineRow, col(BaselineRow.id) == col(BaselineRunRow.baseline_id))
        .where(col(BaselineRow.status) == "live")
    )
    kept = connection.execute(
        select(func.count()).select_from(RepeatSampleRow).where(and_(old, live, _has_raw_data()))
    ).scalar_one()
    pruned = connection.execute(
        update(RepeatSampleRow)
        .where(and_(old, not_(live), _has_raw_data()))
        .values({name: [] for name in RAW_COLUMNS})
    )
    return PruneOutcome(pruned=pruned.rowcount, kept_for_baselines=kept)


def _has_raw_data() -> ColumnElement[bool]:
    """Rows pruned before hold ``[]`` in every raw column: they are not counted again."""
    columns = (
        RepeatSampleRow.step_times_s,
        RepeatSampleRow.losses,
        RepeatSampleRow.dataloader_wait_s,
    )
    return or_(*(cast(col(column), Text) != "[]" for column in columns))
