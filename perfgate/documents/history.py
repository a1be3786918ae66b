"""The history a report draws, as typed data: each head workload's metric over the last runs on
its branch.

A point is one stored run of the same baseline series as the head workload (same suite,
definition, knobs, environment and branch, so the line never mixes incomparable runs), with the
runs of the live baseline window and the recorded change points marked. The store loads it
(``perfgate.store.report_history``), the report draws it (``perfgate.report``): the report
never opens a database. Not a persisted document, so it has no version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_HISTORY_RUNS = 100
"""Runs per workload drawn by default: a few months of nightlies, still a readable line."""


@dataclass(frozen=True, kw_only=True)
class HistoryRun:
    """One stored run of the head workload's series."""

    run_id: str
    commit: str | None
    started_at: str
    medians: Mapping[str, float | None]
    """Metric → median over the run's repeats."""
    in_baseline: bool = False
    """The live baseline was built from this run."""
    change_point_metrics: frozenset[str] = frozenset()
    """Metrics whose recorded step change starts at this run."""


@dataclass(frozen=True, kw_only=True)
class WorkloadHistory:
    """The series of one head workload, oldest run first."""

    runs: list[HistoryRun] = field(default_factory=list)
    baseline_reason: str | None = None
    """Why the live baseline was set (first baseline, change point at a commit, …)."""
    baseline_created_at: str | None = None
