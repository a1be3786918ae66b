"""The baseline snapshot (``perfgate.baseline``): one live baseline, as committed in
``baselines/<suite>/<workload>@<preset>-<key prefix>.json`` so that a pull request can be judged
from its base branch's files alone.

A snapshot stands alone: the key's identity, the environment fingerprint, how and why the
baseline was set, the runs it came from, and per metric the run medians and the pooled
per-repeat values (the statistical unit compare uses; never individual steps).

Format history:

- 1.0 (perfgate 0.1, 2026-11): first version.
- 1.1 (2026-12-02): the header's ``schema_minor``.
- 1.2 (2026-12-06): ``preset`` (optional), and the readable file name it gives.
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
    preset: str | None = None
    """The preset the baseline's runs measured (null in snapshots of format 1.0 and 1.1)."""


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


KEY_PREFIX = 12
"""Hex digits of the key in a snapshot's file name: unique among a suite's few dozen keys (the
reader checks the whole key inside the file), short enough to read in a diff."""


def snapshot_path(
    out_dir: Path, suite: str | None, key: str, workload: str, preset: str | None
) -> Path:
    """Where the snapshot of one key lives, named for a reviewer: ``<suite>/<workload>@<preset>-
    <key prefix>.json`` (``<workload>-<key prefix>.json`` without a preset), always inside
    ``out_dir`` (suite, workload and preset are names, the key a digest; anything else is
    refused, ``perfgate.names``)."""
    folder = NO_SUITE if suite is None else check_name(suite, "suite")
    label = check_name(workload, "workload")
    if preset is not None:
        label += "@" + check_name(preset, "preset")
    return confined(out_dir, folder, f"{label}-{check_key(key)[:KEY_PREFIX]}.json")


def legacy_snapshot_path(out_dir: Path, suite: str | None, key: str) -> Path:
    """Where perfgate before snapshot format 1.2 wrote a key's snapshot (``<suite>/<key>.json``):
    still read, so that a base branch exported by an older perfgate keeps gating."""
    folder = NO_SUITE if suite is None else check_name(suite, "suite")
    return confined(out_dir, folder, f"{check_key(key)}.json")


SNAPSHOT: DocumentKind[BaselineSnapshot] = DocumentKind(
    name="perfgate.baseline",
    major=1,
    minor=2,
    model=BaselineSnapshot,
    produced_by="perfgate baseline export",
)
