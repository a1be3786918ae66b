"""Where the baseline side of a comparison comes from: another result document, the
``baselines/`` snapshots, or the database — each reduced to the same shape, per workload.

The database source is ``perfgate.compare.database_source.from_database``: it reads through the
store, a floor above this module, with :func:`baseline_workload` and :func:`checked_metrics`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.documents.result import MAX_STEP_S, RunResult, WorkCounters, WorkloadResult
from perfgate.documents.snapshot import (
    SNAPSHOT,
    MetricStatistics,
    baseline_key,
    legacy_snapshot_path,
    snapshot_path,
)
from perfgate.errors import UsageError
from perfgate.metrics import (
    CONDITION_PREFIX,
    WORK_PREFIX,
    condition_values,
    metric_values,
    work_from_series,
)
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
    work: WorkCounters | None = None
    """The exact work of one step, when the baseline's runs counted it and agree on it."""


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
            work=w.work,
        )
        for w in run.workloads
        if w.status == "ok"
    }


def from_snapshots(directory: Path, head: RunResult, branch: str) -> dict[str, BaselineWorkload]:
    """Snapshots in ``directory`` (``baselines/<suite>/<workload>@<preset>-<key prefix>.json``,
    or the ``<key>.json`` of an older perfgate) matching the head's workloads.

    A head workload whose key has no snapshot is simply absent: the caller reports it.
    """
    if not directory.is_dir():
        raise UsageError(f"baseline folder {directory} does not exist", "export baselines first")
    found = {}
    env_key = fingerprint_key(head.environment)
    for workload in head.workloads:
        key = baseline_key(head.suite, workload.definition_hash, workload.knobs, env_key, branch)
        path = snapshot_path(directory, head.suite, key, workload.name, workload.preset)
        if not path.exists():
            path = legacy_snapshot_path(directory, head.suite, key)
            if not path.exists():
                continue
        snapshot = SNAPSHOT.load(path, "baseline snapshot")
        if snapshot.key != key:  # the file name holds a prefix of the key: check all of it
            raise UsageError(
                f"baseline snapshot {path} holds key {snapshot.key}, not {key}",
                SNAPSHOT_FIX,
            )
        found[workload.name] = baseline_workload(
            workload=snapshot.workload,
            definition_hash=snapshot.definition_hash,
            knobs=snapshot.knobs,
            environment=snapshot.environment or {},
            metrics=checked_metrics(snapshot.metrics, f"baseline snapshot {path}", SNAPSHOT_FIX),
            origin=str(path),
            identity=f"{snapshot.key}@{snapshot.created_at}",
        )
    return found


SNAPSHOT_FIX = "re-export the baselines (perfgate baseline export)"


def conditions_of(workload: WorkloadResult) -> dict[str, list[float]]:
    """The workload's per-repeat conditions keyed by the bare condition name."""
    return {
        name.removeprefix(CONDITION_PREFIX): values
        for name, values in condition_values(workload).items()
    }


def baseline_workload(
    *,
    workload: str,
    definition_hash: str,
    knobs: dict[str, Any],
    environment: dict[str, Any],
    metrics: Mapping[str, MetricStatistics],
    origin: str,
    identity: str,
) -> BaselineWorkload:
    """A snapshot's (or a database baseline's) figures as a baseline: the condition series
    and the work counters apart from the metrics, empty series left out."""
    series = {name: stats.repeat_values for name, stats in metrics.items()}
    prefixes = (CONDITION_PREFIX, WORK_PREFIX)
    return BaselineWorkload(
        name=workload,
        definition_hash=definition_hash,
        knobs=knobs,
        environment=environment,
        metrics={n: v for n, v in series.items() if v and not n.startswith(prefixes)},
        conditions={
            n.removeprefix(CONDITION_PREFIX): v
            for n, v in series.items()
            if n.startswith(CONDITION_PREFIX) and v
        },
        origin=origin,
        identity=identity,
        work=work_from_series(
            {n.removeprefix(WORK_PREFIX): v for n, v in series.items() if n.startswith(WORK_PREFIX)}
        ),
    )


def checked_metrics(
    metrics: dict[str, MetricStatistics], origin: str, fix: str
) -> dict[str, MetricStatistics]:
    """The metrics, once every per-repeat value is a plausible one: step times in (0, a day],
    everything else non-negative (a hand-edited file must never be compared as it is)."""
    for name, stats in metrics.items():
        for index, value in enumerate(stats.repeat_values):
            if not (0 < value <= MAX_STEP_S if name == "step_time_s" else value >= 0):
                raise UsageError(
                    f"{origin}: metrics/{name}/repeat_values/{index} is {value!r}, not a valid "
                    "value",
                    fix,
                )
    return metrics


def throttled_share(workload: WorkloadResult) -> float | None:
    """The largest share of throttled GPU samples over the workload's measured windows."""
    shares = []
    for repeat in workload.repeats:
        gpu = (repeat.telemetry_summary or {}).get("gpu") or {}
        share = gpu.get("throttled_fraction")
        if isinstance(share, (int, float)):
            shares.append(float(share))
    return max(shares) if shares else None
