"""Storing result documents: idempotent by run UUID (the same run twice is stored once).

Several processes may ingest the same documents at once (CI retries, shards uploading together):
rows keyed by the run UUID or the environment hash are inserted with "on conflict do nothing",
so the loser of a race sees the winner's row instead of an error. A run UUID stored with a
*different* document is refused: a reused id would silently mix two measurements.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.sql.dml import Insert
from sqlmodel import Session, SQLModel, col

from perfgate.documents.result import RepeatResult, RunResult, WorkloadResult
from perfgate.errors import UsageError
from perfgate.metrics import condition_values, metric_values, steady_median, work_values
from perfgate.store.engine import make_engine, unavailable_on_error, write_transaction
from perfgate.store.tables import (
    EnvironmentRow,
    MetricSummaryRow,
    RepeatSampleRow,
    RunRow,
    WorkloadResultRow,
)
from perfgate.telemetry.fingerprint import fingerprint_key


class RunConflict(UsageError):
    """A run id is already stored with a different document (a reused or edited result file)."""


def document_digest(result: RunResult) -> str:
    """SHA-256 of the canonical JSON of the document (detects a reused run id). The header's
    ``schema_minor`` is left out: a document written before it existed must keep the digest it
    was stored with when it is ingested again."""
    data = {k: v for k, v in result.to_dict().items() if k != "schema_minor"}
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def store_run(url: str, result: RunResult, root: Path, *, origin: Path | None = None) -> bool:
    """Store ``result``; False when that run id was already stored (nothing is written).

    ``origin`` (the document's path) only makes a conflict message name the file.
    """
    return store_runs(url, [(result, origin)], root)[0]


def store_runs(
    url: str, results: Sequence[tuple[RunResult, Path | None]], root: Path
) -> list[bool]:
    """Store many (result, origin) pairs through one engine, each in its own transaction.

    One engine keeps SQLAlchemy's compiled-statement cache warm: ingesting a folder of
    documents, or a history of thousands of runs, pays the connection set-up once.
    """
    engine = make_engine(url, root)
    try:
        with unavailable_on_error(url):
            return [_store(engine, result, origin) for result, origin in results]
    finally:
        engine.dispose()


def _store(engine: Engine, result: RunResult, origin: Path | None) -> bool:
    digest = document_digest(result)
    env_key = fingerprint_key(result.environment)
    with write_transaction(engine) as connection, Session(bind=connection) as session:
        insert_new = _insert_ignoring_duplicates(connection.dialect.name)
        environment = EnvironmentRow(key=env_key, fingerprint=result.environment)
        connection.execute(insert_new(EnvironmentRow, environment))
        run = insert_new(RunRow, _run_row(result, env_key, digest)).returning(col(RunRow.id))
        if connection.execute(run).first() is None:  # (rowcount is not reliable across drivers)
            _check_same_document(session, result.run_id, digest, origin)
            return False
        for workload in result.workloads:
            _add_workload(session, result.run_id, workload)
        session.flush()
    return True


def _insert_ignoring_duplicates(dialect: str) -> Callable[[type[SQLModel], SQLModel], Insert]:
    """An INSERT of one row that does nothing when its primary key is already there."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert

    def build(table: type[SQLModel], row: SQLModel) -> Insert:
        return insert(table).values(**row.model_dump()).on_conflict_do_nothing()

    return build


def _check_same_document(session: Session, run_id: str, digest: str, origin: Path | None) -> None:
    stored = session.get(RunRow, run_id)
    if stored is not None and stored.document_sha256 != digest:
        where = f"{origin}: " if origin else ""
        raise RunConflict(
            f"{where}run {run_id} is already stored, and this document differs from the stored "
            f"one (sha256 {digest[:12]} here, {stored.document_sha256[:12]} stored)",
            "a run id must not be reused: ingest the original file, or run again for a new id",
        )


def _run_row(result: RunResult, env_key: str, digest: str) -> RunRow:
    source = result.source
    return RunRow(
        id=result.run_id,
        suite=result.suite,
        device=result.device,
        commit=source.commit,
        branch=source.branch,
        pr_number=source.pr_number,
        trigger=source.trigger,
        repository=source.repository,
        started_at=result.started_at,
        finished_at=result.finished_at,
        status=result.status,
        perfgate_version=result.perfgate_version,
        environment_key=env_key,
        settings=result.to_dict()["settings"],
        document_sha256=digest,
    )


def _add_workload(session: Session, run_id: str, workload: WorkloadResult) -> None:
    summary = workload.summary
    row = WorkloadResultRow(
        run_id=run_id,
        name=workload.name,
        version=workload.version,
        kind=workload.kind,
        preset=workload.preset,
        definition_hash=workload.definition_hash,
        knobs=workload.knobs,
        status=workload.status,
        error=workload.error,
        median_step_s=summary.median_step_s if summary else None,
        samples_per_s=summary.samples_per_s if summary else None,
        tokens_per_s=summary.tokens_per_s if summary else None,
        tflops=summary.tflops if summary else None,
        mfu=summary.mfu if summary else None,
        peak_memory_bytes=summary.peak_memory_bytes if summary else None,
        summary=summary.__dict__ if summary else {},
    )
    session.add(row)
    session.flush()
    assert row.id is not None
    for repeat in workload.repeats:
        session.add(_sample_row(row.id, repeat))
    measured = {**metric_values(workload), **condition_values(workload), **work_values(workload)}
    for metric, values in measured.items():
        session.add(
            MetricSummaryRow(
                workload_result_id=row.id,
                metric=metric,
                median=statistics.median(values),
                repeat_values=values,
            )
        )


def _sample_row(workload_result_id: int, repeat: RepeatResult) -> RepeatSampleRow:
    return RepeatSampleRow(
        workload_result_id=workload_result_id,
        repeat_index=repeat.index,
        status=repeat.status,
        steady_start=repeat.steady_start,
        median_step_s=steady_median(repeat) if repeat.step_times_s[repeat.steady_start :] else None,
        step_times_s=repeat.step_times_s,
        losses=repeat.losses,
        dataloader_wait_s=repeat.dataloader_wait_s,
        telemetry_summary=repeat.telemetry_summary,
    )
