"""Where the baseline side of a comparison comes from: another result document, the
``baselines/`` snapshots, or the database — each reduced to the same shape, per workload."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.errors import UsageError
from perfgate.files import check_json_values, read_json
from perfgate.metrics import CONDITION_PREFIX, condition_values, metric_values
from perfgate.result import MAX_STEP_S, RunResult, WorkloadResult
from perfgate.telemetry.fingerprint import fingerprint_key


@dataclass(frozen=True, kw_only=True)
class BaselineWorkload:
    """The baseline of one workload: per-metric repeat values and what identifies it."""

    name: str
    definition_hash: str
    knobs: dict[str, Any]
    environment: dict[str, Any]
    metrics: dict[str, list[float]]
    origin: str
    """Where it came from, for the report (a file, a snapshot, a database baseline id)."""
    identity: str
    """What it is, independent of where it was read: a run's id, or a baseline's key and
    creation time (a database baseline and its exported snapshot share it). Seeds the
    comparison's bootstrap (``perfgate.compare.gate.comparison_seed``)."""
    final_loss: float | None = None
    throttled_share: float | None = None
    conditions: dict[str, list[float]] = field(default_factory=dict)
    """Per-repeat measurement conditions (``perfgate.metrics.condition_values``, keyed by the
    condition's name); empty for baselines recorded before perfgate kept them."""
    canary: bool = False
    """The baseline side is a canary run (an injected slowdown): never a fair reference."""
    repeats: dict[str, list[float]] = field(default_factory=dict)


def from_result(run: RunResult, origin: str) -> dict[str, BaselineWorkload]:
    """Every successful workload of a result document, as a baseline."""
    return {
        w.name: BaselineWorkload(
            name=w.name,
            definition_hash=w.definition_hash,
            knobs=w.knobs,
            environment=run.environment,
            metrics=metric_values(w),
            origin=origin,
            identity=run.run_id,
            final_loss=w.summary.final_loss if w.summary else None,
            throttled_share=throttled_share(w),
            conditions=conditions_of(w),
            canary=bool(run.settings.inject_slowdown),
        )
        for w in run.workloads
        if w.status == "ok"
    }


def from_snapshots(directory: Path, head: RunResult, branch: str) -> dict[str, BaselineWorkload]:
    """Snapshots in ``directory`` (``baselines/<suite>/<key>.json``) matching the head's workloads.

    A head workload whose key has no snapshot is simply absent: the caller reports it.
    """
    from perfgate.baseline.export import snapshot_path
    from perfgate.store.history import baseline_key

    if not directory.is_dir():
        raise UsageError(f"baseline folder {directory} does not exist", "export baselines first")
    found = {}
    env_key = fingerprint_key(head.environment)
    for workload in head.workloads:
        key = baseline_key(head.suite, workload.definition_hash, workload.knobs, env_key, branch)
        path = snapshot_path(directory, head.suite, key)
        if not path.exists():
            continue
        data = read_json(path, what="baseline snapshot", fix=SNAPSHOT_FIX)
        found[workload.name] = _from_snapshot(data, str(path), SNAPSHOT_FIX)
    return found


SNAPSHOT_FIX = "re-export the baselines (perfgate baseline export)"


def conditions_of(workload: WorkloadResult) -> dict[str, list[float]]:
    """The workload's per-repeat conditions keyed by the bare condition name."""
    return {
        name.removeprefix(CONDITION_PREFIX): values
        for name, values in condition_values(workload).items()
    }


def _from_snapshot(data: Any, origin: str, fix: str) -> BaselineWorkload:
    """A snapshot (or a database baseline in its shape) as a baseline, checked first: a
    hand-edited or truncated file is a usage error naming the field, never a crash or a
    comparison against NaN."""
    check_json_values(data, origin, fix)
    if not isinstance(data, dict):
        raise UsageError(f"{origin} is not a baseline snapshot (a JSON {type(data).__name__})", fix)
    for key, kind in (("workload", str), ("definition_hash", str), ("metrics", dict)):
        if not isinstance(data.get(key), kind):
            raise UsageError(f"{origin}: {key} should be a {kind.__name__}", fix)
    for key in ("knobs", "environment"):
        if not isinstance(data.get(key) or {}, dict):
            raise UsageError(f"{origin}: {key} should be an object", fix)
    series = {
        name: _repeat_values(origin, name, stats, fix) for name, stats in data["metrics"].items()
    }
    metrics = {n: v for n, v in series.items() if not n.startswith(CONDITION_PREFIX)}
    conditions = {
        n.removeprefix(CONDITION_PREFIX): v
        for n, v in series.items()
        if n.startswith(CONDITION_PREFIX) and v
    }
    return BaselineWorkload(
        name=data["workload"],
        definition_hash=data["definition_hash"],
        knobs=data.get("knobs", {}),
        environment=data.get("environment") or {},
        metrics={name: values for name, values in metrics.items() if values},
        conditions=conditions,
        origin=origin,
        identity=f"{data.get('key') or data['workload']}@{data.get('created_at') or ''}",
    )


def _repeat_values(origin: str, name: str, stats: Any, fix: str) -> list[float]:
    """One metric's per-repeat values: non-negative numbers, step times in (0, a day]."""
    values = stats.get("repeat_values", []) if isinstance(stats, dict) else None
    if not isinstance(values, list):
        raise UsageError(f"{origin}: metrics/{name} has no list of repeat_values", fix)
    for index, value in enumerate(values):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not (0 < value <= MAX_STEP_S if name == "step_time_s" else value >= 0):
            raise UsageError(
                f"{origin}: metrics/{name}/repeat_values/{index} is {value!r}, not a valid value",
                fix,
            )
    return [float(v) for v in values]


def throttled_share(workload: WorkloadResult) -> float | None:
    """The largest share of throttled GPU samples over the workload's measured windows."""
    shares = []
    for repeat in workload.repeats:
        gpu = (repeat.telemetry_summary or {}).get("gpu") or {}
        share = gpu.get("throttled_fraction")
        if isinstance(share, (int, float)):
            shares.append(float(share))
    return max(shares) if shares else None


def from_database(
    url: str, root: Path, head: RunResult, branch: str
) -> dict[str, BaselineWorkload]:
    """Live baselines in the database whose key matches the head's workloads on ``branch``."""
    from sqlmodel import Session

    from perfgate.store.engine import make_engine
    from perfgate.store.history import baseline_key, environment_fingerprint, live_baseline

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
                found[workload.name] = _from_snapshot(
                    {
                        "key": row.key,
                        "created_at": row.created_at,
                        "workload": row.workload,
                        "definition_hash": row.definition_hash,
                        "knobs": row.knobs,
                        "environment": environment_fingerprint(session, row.environment_key),
                        "metrics": row.metrics,
                    },
                    f"database baseline {row.id} ({row.branch}, {row.created_at})",
                    "refresh the baselines (perfgate baseline refresh)",
                )
    finally:
        engine.dispose()
    return found
