"""Calibrations: each workload's A/A noise on an environment (``perfgate calibrate``).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the calibrations table, indexed for the lookup compare does (workload, code, machine)."""
    op.create_table(
        "calibrations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("workload", sa.String(), nullable=False),
        sa.Column("preset", sa.String(), nullable=False),
        sa.Column("definition_hash", sa.String(64), nullable=False),
        sa.Column("knobs", sa.JSON(), nullable=False),
        sa.Column("device", sa.String(), nullable=False),
        sa.Column("environment_key", sa.String(64), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("repeats", sa.Integer(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("warmup", sa.Integer(), nullable=False),
        sa.Column("step_median_s", sa.Float(), nullable=False),
        sa.Column("within_cv", sa.Float(), nullable=False),
        sa.Column("between_sigma", sa.Float(), nullable=False),
        sa.Column("repeat_values_s", sa.JSON(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("configured_repeats", sa.Integer(), nullable=False),
        sa.Column("min_detectable", sa.Float(), nullable=True),
        sa.Column("recommended_threshold", sa.Float(), nullable=True),
        sa.Column("target", sa.Float(), nullable=False),
        sa.Column("repeats_for_target", sa.Integer(), nullable=True),
        sa.Column("repeats_for_target_tuned", sa.Integer(), nullable=True),
    )
    op.create_index(
        "ix_calibrations_lookup",
        "calibrations",
        ["workload", "definition_hash", "environment_key"],
    )
