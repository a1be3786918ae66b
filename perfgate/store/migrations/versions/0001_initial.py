"""The first tables (perfgate 0.1): environments, runs, workload results, repeat samples.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the four tables exactly as perfgate 0.1's ``create_all`` made them."""
    op.create_table(
        "environments",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("fingerprint", sa.JSON(), nullable=False),
    )
    _create_runs()
    _create_workload_results()
    _create_repeat_samples()


def _create_runs() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("suite", sa.String(), nullable=True),
        sa.Column("device", sa.String(), nullable=False),
        sa.Column("commit", sa.String(), nullable=True),
        sa.Column("branch", sa.String(), nullable=True),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("trigger", sa.String(), nullable=False),
        sa.Column("repository", sa.String(), nullable=True),
        sa.Column("started_at", sa.String(), nullable=False),
        sa.Column("finished_at", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("perfgate_version", sa.String(), nullable=False),
        sa.Column(
            "environment_key", sa.String(), sa.ForeignKey("environments.key"), nullable=False
        ),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("document_sha256", sa.String(64), nullable=False),
    )
    op.create_index("ix_runs_commit", "runs", ["commit"])
    op.create_index("ix_runs_environment_key", "runs", ["environment_key"])
    op.create_index("ix_runs_branch_started", "runs", ["branch", "started_at"])


def _create_workload_results() -> None:
    op.create_table(
        "workload_results",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("preset", sa.String(), nullable=False),
        sa.Column("definition_hash", sa.String(64), nullable=False),
        sa.Column("knobs", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("median_step_s", sa.Float(), nullable=True),
        sa.Column("samples_per_s", sa.Float(), nullable=True),
        sa.Column("tokens_per_s", sa.Float(), nullable=True),
        sa.Column("tflops", sa.Float(), nullable=True),
        sa.Column("mfu", sa.Float(), nullable=True),
        sa.Column("peak_memory_bytes", sa.Integer(), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
    )
    op.create_index("ix_workload_results_run_id", "workload_results", ["run_id"])
    op.create_index("ix_workload_results_name", "workload_results", ["name"])
    op.create_index(
        "ix_workload_results_hash_run", "workload_results", ["definition_hash", "run_id"]
    )


def _create_repeat_samples() -> None:
    op.create_table(
        "repeat_samples",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "workload_result_id",
            sa.Integer(),
            sa.ForeignKey("workload_results.id"),
            nullable=False,
        ),
        sa.Column("repeat_index", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("steady_start", sa.Integer(), nullable=False),
        sa.Column("median_step_s", sa.Float(), nullable=True),
        sa.Column("step_times_s", sa.JSON(), nullable=False),
        sa.Column("losses", sa.JSON(), nullable=False),
        sa.Column("dataloader_wait_s", sa.JSON(), nullable=False),
        sa.Column("telemetry_summary", sa.JSON(), nullable=True),
    )
    op.create_index(
        "ix_repeat_samples_workload_result_id", "repeat_samples", ["workload_result_id"]
    )
