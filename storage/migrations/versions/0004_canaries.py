"""canary probes, runs and baselines

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "canary_baselines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("probe_set_version", sa.String(length=64), nullable=False),
        sa.Column("model_version", sa.String(length=128), nullable=True),
        sa.Column("engine", sa.JSON(), nullable=True),
        sa.Column("expected", sa.JSON(), nullable=False),
        sa.Column("tolerances", sa.JSON(), nullable=False),
        sa.Column("calibration", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_canary_baselines_status"), "canary_baselines", ["status"])
    op.create_table(
        "canary_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("baseline_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("model_version", sa.String(length=128), nullable=True),
        sa.Column("engine", sa.JSON(), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["baseline_id"], ["canary_baselines.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_canary_runs_baseline_id"), "canary_runs", ["baseline_id"])
    op.create_index(op.f("ix_canary_runs_started_at"), "canary_runs", ["started_at"])
    op.create_table(
        "canary_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("probe", sa.String(length=128), nullable=False),
        sa.Column("token_ids", sa.JSON(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("logprobs", sa.JSON(), nullable=False),
        sa.Column("perplexity", sa.Float(), nullable=True),
        sa.Column("comparison", sa.JSON(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["canary_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "probe", name="uq_canary_result_probe"),
    )
    op.create_index(op.f("ix_canary_results_run_id"), "canary_results", ["run_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_canary_results_run_id"), table_name="canary_results")
    op.drop_table("canary_results")
    op.drop_index(op.f("ix_canary_runs_started_at"), table_name="canary_runs")
    op.drop_index(op.f("ix_canary_runs_baseline_id"), table_name="canary_runs")
    op.drop_table("canary_runs")
    op.drop_index(op.f("ix_canary_baselines_status"), table_name="canary_baselines")
    op.drop_table("canary_baselines")
