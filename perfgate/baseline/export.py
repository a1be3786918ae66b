"""Baseline snapshots in ``baselines/<suite>/<workload>@<preset>-<key prefix>.json``: reviewed,
diff-friendly, small.

A pull request is judged against the snapshots of its *base* branch, so they must stand alone:
each holds the key's identity, the environment fingerprint, how and why the baseline was set, the
runs it came from, and per-metric run medians and per-repeat values (never individual steps).
The folder mirrors the live baselines of the branch: a key whose baseline is gone loses its file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from perfgate.baseline.refresh import RefreshPolicy
from perfgate.documents.snapshot import SNAPSHOT, BaselineSnapshot, SnapshotRun, snapshot_path
from perfgate.errors import InfrastructureError
from perfgate.files import write_json_atomic
from perfgate.store.history import (
    baseline_members,
    environment_fingerprint,
    list_baselines,
    member_presets,
    runs_by_id,
    stored_metrics,
)
from perfgate.store.tables import BaselineRow


def export_baselines(
    engine: Engine, branch: str, out_dir: Path, *, allow_empty: bool = False
) -> tuple[list[Path], list[Path]]:
    """Write every live baseline of ``branch``; remove stale snapshots of that branch.

    Returns (written, removed) paths. Output is deterministic: the same database state gives
    byte-identical files. With no live baseline at all nothing is written or removed and, unless
    ``allow_empty``, that is an error: an empty or wrong database (a mistyped URL) must not
    silently look like a successful export, nor delete the committed snapshots.
    """
    with Session(engine) as session:
        snapshots = [snapshot(session, b) for b in list_baselines(session, branch=branch)]
    documents = {
        snapshot_path(out_dir, s.suite, s.key, s.workload, s.preset): SNAPSHOT.dump(s)
        for s in snapshots
    }
    if not documents:
        if allow_empty:
            return [], []
        raise InfrastructureError(
            f"no live baseline on branch {branch} to export",
            f"store runs (perfgate run, or ingest) and run perfgate baseline refresh --branch "
            f"{branch} first (a baseline needs {RefreshPolicy().min_runs} stable runs), or pass "
            "--allow-empty",
        )
    written = []
    for path, document in sorted(documents.items()):
        if _stored(path) != document:
            write_json_atomic(path, document, option="--out-dir")
        written.append(path)
    removed = [p for p in _branch_snapshots(out_dir, branch) if p not in documents]
    for path in removed:
        path.unlink()
    return written, removed


def snapshot(session: Session, baseline: BaselineRow) -> BaselineSnapshot:
    """The snapshot of one baseline."""
    assert baseline.id is not None
    members = baseline_members(session, baseline.id)
    runs = runs_by_id(session, [m.run_id for m in members])
    presets = member_presets(session, [m.workload_result_id for m in members])
    return BaselineSnapshot(
        key=baseline.key,
        preset=presets[0] if len(presets) == 1 else None,
        suite=baseline.suite,
        workload=baseline.workload,
        definition_hash=baseline.definition_hash,
        knobs=baseline.knobs,
        branch=baseline.branch,
        environment_key=baseline.environment_key,
        environment=environment_fingerprint(session, baseline.environment_key),
        created_at=baseline.created_at,
        reason=baseline.reason,
        method=baseline.method,
        metrics=stored_metrics(baseline.metrics),
        runs=sorted(
            (
                SnapshotRun(
                    run_id=m.run_id,
                    commit=runs[m.run_id].commit if m.run_id in runs else None,
                    started_at=runs[m.run_id].started_at if m.run_id in runs else None,
                    used=m.used,
                )
                for m in members
            ),
            key=lambda r: (r.started_at or "", r.run_id),
        ),
    )


def _branch_snapshots(out_dir: Path, branch: str) -> list[Path]:
    found = []
    for path in sorted(out_dir.glob("*/*.json")):
        data = _stored(path)
        is_snapshot = isinstance(data, dict) and data.get("schema") == SNAPSHOT.name
        if is_snapshot and data.get("branch") == branch:
            found.append(path)
    return found


def _stored(path: Path) -> Any:
    """The JSON now at ``path``; None when there is none or it cannot be read (a folder, not
    UTF-8, truncated, nested too deep): the export replaces a malformed snapshot, never
    crashes on it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
