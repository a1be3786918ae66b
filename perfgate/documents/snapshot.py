"""The baseline snapshot (``perfgate.baseline``): one live baseline, as committed in
``baselines/<suite>/<key>.json`` so that a pull request can be judged from its base branch's
files alone.

A snapshot stands alone: the key's identity, the environment fingerprint, how and why the
baseline was set, the runs it came from, and per metric the run medians and the pooled
per-repeat values (the statistical unit compare uses; never individual steps).

Format history:

- 1.0 (perfgate 0.1, 2026-11): first version.
- 1.1 (2026-12-02): the header's ``schema_minor``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.documents.base import DocumentKind
from perfgate.names import check_key, check_name, confined


@dataclass(frozen=True, kw_only=True)
class MetricStatistics:
    """One metric over the runs a baseline was built from."""

    median: float
    """Median of the run medians."""
    run_medians: list[float]
    repeat_values: list[float]
    """Every repeat's value, pooled over the runs: what a head's repeats are compared with."""
    runs: int
    repeats: int


@dataclass(frozen=True, kw_only=True)
class SnapshotRun:
    """One run of the baseline's window, and whether it was used (or dropped as an outlier)."""

    run_id: str
    commit: str | None
    started_at: str | None
    used: bool


@dataclass(frozen=True, kw_only=True)
class BaselineSnapshot:
    """One live baseline of a branch."""

    key: str
    suite: str | None
    workload: str
    definition_hash: str
    knobs: dict[str, Any]
    branch: str
    environment_key: str
    environment: dict[str, Any] | None
    created_at: str
    reason: str
    method: dict[str, Any]
    """How the baseline was built (the refresh policy's figures)."""
    metrics: dict[str, MetricStatistics]
    runs: list[SnapshotRun] = field(default_factory=list)


def baseline_key(
    suite: str | None,
    definition_hash: str,
    knobs: Mapping[str, Any],
    environment_key: str,
    branch: str,
) -> str:
    """SHA-256 naming one baseline series: what ran, with which knobs, where, on which branch."""
    identity = {
        "suite": suite,
        "definition_hash": definition_hash,
        "knobs": dict(knobs),
        "environment_key": environment_key,
        "branch": branch,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


NO_SUITE = "_workloads"
"""Folder for baselines of runs that named workloads instead of a suite."""


def snapshot_path(out_dir: Path, suite: str | None, key: str) -> Path:
    """Where the snapshot of one key lives: always inside ``out_dir`` (a suite is a name, a
    key a digest; anything else is refused, ``perfgate.names``)."""
    folder = NO_SUITE if suite is None else check_name(suite, "suite")
    return confined(out_dir, folder, f"{check_key(key)}.json")


SNAPSHOT: DocumentKind[BaselineSnapshot] = DocumentKind(
    name="perfgate.baseline",
    major=1,
    minor=1,
    model=BaselineSnapshot,
    produced_by="perfgate baseline export",
)
