"""Storing result documents: idempotent by run UUID (the same run twice is stored once)."""

from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path

from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session

from perfgate.result import RunResult, WorkloadResult
from perfgate.store.engine import StoreUnavailable, make_engine
from perfgate.store.tables import EnvironmentRow, RepeatSampleRow, RunRow, WorkloadResultRow
from perfgate.telemetry.fingerprint import fingerprint_key


def document_digest(result: RunResult) -> str:
    """SHA-256 of the canonical JSON of the document (detects a reused run id)."""
    canonical = json.dumps(result.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def store_run(url: str, result: RunResult, root: Path) -> bool:
    """Store ``result``; False when that run id was already stored (nothing is written)."""
    engine = make_engine(url, root)
    try:
        with Session(engine) as session:
            if session.get(RunRow, result.run_id) is not None:
                return False
            env_key = fingerprint_key(result.environment)
            if session.get(EnvironmentRow, env_key) is None:
                session.add(EnvironmentRow(key=env_key, fingerprint=result.environment))
            session.add(_run_row(result, env_key))
            for workload in result.workloads:
                _add_workload(session, result.run_id, workload)
            session.commit()
    except IntegrityError:
        return False  # another process stored the same run between our check and commit
    except OperationalError as exc:
        raise StoreUnavailable(str(exc.orig).splitlines()[0]) from None
    finally:
        engine.dispose()
    return True


def _run_row(result: RunResult, env_key: str) -> RunRow:
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
        document_sha256=document_digest(result),
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
        steady = repeat.step_times_s[repeat.steady_start :]
        session.add(
            RepeatSampleRow(
                workload_result_id=row.id,
                repeat_index=repeat.index,
                status=repeat.status,
                steady_start=repeat.steady_start,
                median_step_s=statistics.median(steady) if steady else None,
                step_times_s=repeat.step_times_s,
                losses=repeat.losses,
                dataloader_wait_s=repeat.dataloader_wait_s,
                telemetry_summary=repeat.telemetry_summary,
            )
        )
