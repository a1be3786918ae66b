"""The refresh document (``perfgate baseline refresh --json``): what a refresh did per key.

The nightly job reads it to find the steps it must explain: every change point the refresh
recorded for the first time, with the runs and commits on either side, is a range
``perfgate bisect-steps`` searches for the commit that caused it.

Format history: 1.0 (2026-12-07): first version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perfgate.documents.base import DocumentKind

RefreshAction = Literal["created", "moved", "unchanged", "insufficient"]


@dataclass(frozen=True, kw_only=True)
class RefreshStep:
    """A change point in one key's history of the gated metric, with the runs around it."""

    index: int
    """Position of the first run after the step in the key's history (oldest run is 0)."""
    metric: str
    median_before: float
    median_after: float
    run_before: str
    run_after: str
    commit_before: str | None
    """The commit of the last run before the step (None when that run recorded none)."""
    commit_after: str | None
    new: bool
    """First recorded by this refresh (an older one was explained on an earlier night)."""

    @property
    def relative_change(self) -> float:
        """``median_after / median_before - 1``: above zero the metric (a time) grew."""
        return self.median_after / self.median_before - 1


@dataclass(frozen=True, kw_only=True)
class KeyRefresh:
    """What a refresh did for one key (suite, definition, knobs, environment, branch)."""

    key: str
    workload: str
    suite: str | None
    action: RefreshAction
    reason: str
    runs_in_history: int
    baseline_id: int | None = None
    change_points: list[RefreshStep] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class RefreshReport:
    """One ``baseline refresh`` of a branch."""

    branch: str
    refreshed_at: str
    """UTC time of the refresh, ISO 8601 to the second."""
    keys: list[KeyRefresh] = field(default_factory=list)

    def new_slowdowns(self) -> list[tuple[KeyRefresh, RefreshStep]]:
        """Steps first seen by this refresh where the gated time grew, oldest key first."""
        return [
            (key, step)
            for key in self.keys
            for step in key.change_points
            if step.new and step.relative_change > 0
        ]


REFRESH: DocumentKind[RefreshReport] = DocumentKind(
    name="perfgate.refresh",
    major=1,
    minor=0,
    model=RefreshReport,
    produced_by="perfgate baseline refresh --json",
)
