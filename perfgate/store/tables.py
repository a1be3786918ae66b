"""SQLModel tables: environments, runs, workload results and per-repeat samples.

Raw per-step samples are kept per repeat as compact JSON arrays: they are always read together,
and one row per step would multiply the row count by the step count for no query that needs it.
Indexed columns are the ones baselines and history are looked up by.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, text
from sqlmodel import Field, SQLModel


class EnvironmentRow(SQLModel, table=True):
    """One environment fingerprint (GPU, driver, torch, CPU, …), keyed by its hash."""

    __tablename__ = "environments"

    key: str = Field(primary_key=True, max_length=64)
    fingerprint: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))


class RunRow(SQLModel, table=True):
    """One ``perfgate run`` (one result document), keyed by its UUID."""

    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_branch_started", "branch", "started_at"),)

    id: str = Field(primary_key=True, max_length=36)
    suite: str | None = None
    device: str
    commit: str | None = Field(default=None, index=True)
    branch: str | None = None
    pr_number: int | None = None
    trigger: str
    repository: str | None = None
    started_at: str
    finished_at: str
    status: str
    perfgate_version: str
    environment_key: str = Field(foreign_key="environments.key", index=True)
    settings: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    document_sha256: str = Field(max_length=64)


class WorkloadResultRow(SQLModel, table=True):
    """One workload of one run, with its headline numbers."""

    __tablename__ = "workload_results"
    __table_args__ = (Index("ix_workload_results_hash_run", "definition_hash", "run_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    name: str = Field(index=True)
    version: int
    kind: str
    preset: str
    definition_hash: str = Field(max_length=64)
    knobs: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    status: str
    error: str | None = None
    median_step_s: float | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    tflops: float | None = None
    mfu: float | None = None
    peak_memory_bytes: int | None = Field(default=None, sa_column=Column(BigInteger))
    """64-bit: a GPU's memory overflows a 32-bit INTEGER (PostgreSQL; migration 0002)."""
    summary: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))


class RepeatSampleRow(SQLModel, table=True):
    """One repeat's raw samples (step times, losses, waits) and telemetry summary."""

    __tablename__ = "repeat_samples"

    id: int | None = Field(default=None, primary_key=True)
    workload_result_id: int = Field(foreign_key="workload_results.id", index=True)
    repeat_index: int
    status: str
    steady_start: int
    median_step_s: float | None = None
    step_times_s: list[float] = Field(sa_column=Column(JSON, nullable=False))
    losses: list[float | None] = Field(sa_column=Column(JSON, nullable=False))
    dataloader_wait_s: list[float] = Field(sa_column=Column(JSON, nullable=False))
    telemetry_summary: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class MetricSummaryRow(SQLModel, table=True):
    """One metric of one workload result, summarised over its repeats (the unit of comparison)."""

    __tablename__ = "metric_summaries"
    __table_args__ = (Index("ix_metric_summaries_result_metric", "workload_result_id", "metric"),)

    id: int | None = Field(default=None, primary_key=True)
    workload_result_id: int = Field(foreign_key="workload_results.id")
    metric: str
    """``step_time_s``, ``samples_per_s``, ``tokens_per_s``, ``tflops``, ``mfu``,
    ``peak_memory_bytes``."""
    median: float | None = None
    repeat_values: list[float] = Field(sa_column=Column(JSON, nullable=False))
    """The per-repeat values (one per ok repeat) the median was taken over."""


LIVE_BASELINE_WHERE = "status = 'live'"
"""The rows the one-live-baseline index covers (SQL, the same for SQLite and PostgreSQL)."""


class BaselineRow(SQLModel, table=True):
    """A baseline for one key; a refresh retires the live one and adds a new one, never edits.

    At most one live baseline per key is the database's rule, not only the refresh's intent:
    the partial unique index ``uq_baselines_live_key`` (migration 0004) refuses a second one,
    whoever writes it. Two live baselines made compare read either one (issue 16).
    """

    __tablename__ = "baselines"
    __table_args__ = (
        Index("ix_baselines_key_status", "key", "status"),
        Index(
            "uq_baselines_live_key",
            "key",
            unique=True,
            sqlite_where=text(LIVE_BASELINE_WHERE),
            postgresql_where=text(LIVE_BASELINE_WHERE),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64)
    """SHA-256 over (suite, definition hash, knobs, environment key, branch)."""
    suite: str | None = None
    workload: str
    definition_hash: str = Field(max_length=64)
    knobs: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    environment_key: str = Field(foreign_key="environments.key")
    branch: str
    status: str = "live"
    """``live`` or ``retired`` (kept for audit)."""
    created_at: str
    retired_at: str | None = None
    reason: str
    """Why it was set: first baseline, change point at a commit, window moved …"""
    method: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    """How it was built: window, minimum segment, outliers dropped."""
    metrics: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    """Per metric: median, per-run values and per-repeat statistics."""


class BaselineRunRow(SQLModel, table=True):
    """Which workload results a baseline was built from, and which were dropped as outliers."""

    __tablename__ = "baseline_runs"

    baseline_id: int = Field(foreign_key="baselines.id", primary_key=True)
    workload_result_id: int = Field(foreign_key="workload_results.id", primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    used: bool = True


class ChangePointRow(SQLModel, table=True):
    """A step found in a key's history, with the runs and commits on each side."""

    __tablename__ = "change_points"
    __table_args__ = (Index("ix_change_points_key", "key"),)

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64)
    metric: str
    run_before: str = Field(foreign_key="runs.id")
    commit_before: str | None = None
    run_after: str = Field(foreign_key="runs.id")
    commit_after: str | None = None
    median_before: float
    median_after: float
    detected_at: str


class CalibrationRow(SQLModel, table=True):
    """One workload's A/A calibration on one environment (``perfgate calibrate``); never edited,
    a newer calibration of the same workload and environment simply takes precedence.

    ``environment_key`` is not a foreign key: a calibration may come before any stored run of
    its environment, and it is only ever looked up by key equality. Null figures mean "never"
    (the test cannot reach significance, or no repeat count within the limit suffices).
    """

    __tablename__ = "calibrations"
    __table_args__ = (
        Index("ix_calibrations_lookup", "workload", "definition_hash", "environment_key"),
    )

    id: int | None = Field(default=None, primary_key=True)
    workload: str
    preset: str
    definition_hash: str = Field(max_length=64)
    knobs: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    device: str
    environment_key: str = Field(max_length=64)
    created_at: str
    repeats: int
    steps: int
    warmup: int
    step_median_s: float
    within_cv: float
    between_sigma: float
    repeat_values_s: list[float] = Field(sa_column=Column(JSON, nullable=False))
    threshold: float
    configured_repeats: int
    min_detectable: float | None = None
    recommended_threshold: float | None = None
    target: float
    repeats_for_target: int | None = None
    repeats_for_target_tuned: int | None = None
