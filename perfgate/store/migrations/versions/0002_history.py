"""History and baselines: metric summaries, baselines (with their runs), change points.

Also widens ``workload_results.peak_memory_bytes`` to 64 bits: PostgreSQL's INTEGER overflows
at 2 GiB, below any GPU's memory (SQLite's INTEGER is already 64-bit).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the four history tables and widen the peak-memory column."""
    _create_metric_summaries()
    _create_baselines()
    _create_baseline_runs()
    _create_change_points()
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column(
            "workload_results",
            "peak_memory_bytes",
            type_=sa.BigInteger(),
            existing_type=sa.Integer(),
            existing_nullable=True,
        )


def _create_metric_summaries() -> None:
    op.create_table(
        "metric_summaries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "workload_result_id",
            sa.Integer(),
            sa.ForeignKey("workload_results.id"),
            nullable=False,
        ),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("median", sa.Float(), nullable=True),
        sa.Column("repeat_values", sa.JSON(), nullable=False),
    )
    op.create_index(
        "ix_metric_summaries_result_metric", "metric_summaries", ["workload_result_id", "metric"]
    )


def _create_baselines() -> None:
    op.create_table(
        "baselines",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("suite", sa.String(), nullable=True),
        sa.Column("workload", sa.String(), nullable=False),
        sa.Column("definition_hash", sa.String(64), nullable=False),
        sa.Column("knobs", sa.JSON(), nullable=False),
        sa.Column(
            "environment_key", sa.String(), sa.ForeignKey("environments.key"), nullable=False
        ),
        sa.Column("branch", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("retired_at", sa.String(), nullable=True),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("method", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
    )
    op.create_index("ix_baselines_key_status", "baselines", ["key", "status"])


def _create_baseline_runs() -> None:
    op.create_table(
        "baseline_runs",
        sa.Column("baseline_id", sa.Integer(), sa.ForeignKey("baselines.id"), primary_key=True),
        sa.Column(
            "workload_result_id",
            sa.Integer(),
            sa.ForeignKey("workload_results.id"),
            primary_key=True,
        ),
        sa.Column("run_id", sa.String(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("used", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_baseline_runs_run_id", "baseline_runs", ["run_id"])


def _create_change_points() -> None:
    op.create_table(
        "change_points",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("metric", sa.String(), nullable=False),
        sa.Column("run_before", sa.String(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("commit_before", sa.String(), nullable=True),
        sa.Column("run_after", sa.String(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("commit_after", sa.String(), nullable=True),
        sa.Column("median_before", sa.Float(), nullable=False),
        sa.Column("median_after", sa.Float(), nullable=False),
        sa.Column("detected_at", sa.String(), nullable=False),
    )
    op.create_index("ix_change_points_key", "change_points", ["key"])
