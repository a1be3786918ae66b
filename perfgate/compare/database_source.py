"""The live baselines in the database, as the baseline side of a comparison.

``perfgate.compare.baseline_source`` reads the other sources (a result document, the
``baselines/`` snapshots) and stays free of the database stack; this module reads the store,
a floor above that engine, and ``compare`` loads it only when it reads the database.
"""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from perfgate.compare.baseline_source import BaselineWorkload, baseline_workload, checked_metrics
from perfgate.documents.result import RunResult
from perfgate.documents.snapshot import baseline_key
from perfgate.store.engine import make_engine
from perfgate.store.history import environment_fingerprint, live_baseline, stored_metrics
from perfgate.telemetry.fingerprint import fingerprint_key


def from_database(
    url: str, root: Path, head: RunResult, branch: str
) -> dict[str, BaselineWorkload]:
    """Live baselines in the database whose key matches the head's workloads on ``branch``."""
    engine = make_engine(url, root)
    env_key = fingerprint_key(head.environment)
    found = {}
    try:
        with Session(engine) as session:
            for workload in head.workloads:
                key = baseline_key(
                    head.suite, workload.definition_hash, workload.knobs, env_key, branch
                )
                row = live_baseline(session, key)
                if row is None:
                    continue
                origin = f"database baseline {row.id} ({row.branch}, {row.created_at})"
                found[workload.name] = baseline_workload(
                    workload=row.workload,
                    definition_hash=row.definition_hash,
                    knobs=row.knobs,
                    environment=environment_fingerprint(session, row.environment_key) or {},
                    metrics=checked_metrics(
                        stored_metrics(row.metrics),
                        origin,
                        "refresh the baselines (perfgate baseline refresh)",
                    ),
                    origin=origin,
                    identity=f"{row.key}@{row.created_at}",
                )
    finally:
        engine.dispose()
    return found
