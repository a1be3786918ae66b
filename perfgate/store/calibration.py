"""Calibrations in the database: saved by ``perfgate calibrate``, looked up by compare.

Persistence only. A calibration applies to a head workload when it measured the same code,
preset and knobs (definition hash) on the same kind of machine (environment key); the newest
such one wins, older ones stay for the record.

Both functions raise ``StoreUnavailable`` (exit code 3) when the database cannot be reached or
is at another schema revision; compare, which only wants an explanation, may treat that as
"no calibration".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from sqlmodel import Session, col, select

from perfgate.documents.base import build, json_ready
from perfgate.documents.calibration import Calibration
from perfgate.documents.result import RunResult
from perfgate.store.engine import make_engine, unavailable_on_error, write_transaction
from perfgate.store.tables import CalibrationRow
from perfgate.telemetry.fingerprint import fingerprint_key


def save_calibrations(url: str, root: Path, calibrations: Sequence[Calibration]) -> int:
    """Store every calibration in one transaction; returns how many were stored."""
    if not calibrations:
        return 0
    rows = [
        CalibrationRow(**json_ready(asdict(c))).model_dump(exclude={"id"}) for c in calibrations
    ]
    engine = make_engine(url, root)
    try:
        with unavailable_on_error(url), write_transaction(engine) as connection:
            connection.execute(insert(CalibrationRow), rows)
    finally:
        engine.dispose()
    return len(rows)


def latest_calibrations(url: str, root: Path, head: RunResult) -> dict[str, Calibration]:
    """Workload name → the newest calibration of that workload's definition on the head's
    environment; workloads never calibrated there are absent."""
    return calibrations_for(
        url, root, [(w.name, w.definition_hash) for w in head.workloads], head.environment
    )


def calibrations_for(
    url: str,
    root: Path,
    workloads: Sequence[tuple[str, str]],
    environment: Mapping[str, Any],
) -> dict[str, Calibration]:
    """Workload name → the newest calibration of (name, definition hash) on ``environment``."""
    environment_key = fingerprint_key(dict(environment))
    engine = make_engine(url, root)
    found = {}
    try:
        with unavailable_on_error(url), Session(engine) as session:
            for name, definition_hash in workloads:
                row = session.exec(
                    select(CalibrationRow)
                    .where(CalibrationRow.workload == name)
                    .where(CalibrationRow.definition_hash == definition_hash)
                    .where(CalibrationRow.environment_key == environment_key)
                    .order_by(col(CalibrationRow.created_at).desc(), col(CalibrationRow.id).desc())
                ).first()
                if row is not None:
                    found[name] = _calibration(row)
    finally:
        engine.dispose()
    return found


def _calibration(row: CalibrationRow) -> Calibration:
    """The record of a row: null figures (never detectable) are infinite again."""
    return build(Calibration, row.model_dump(exclude={"id"}), infinite=True)
