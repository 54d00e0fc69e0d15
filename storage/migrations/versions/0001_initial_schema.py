"""initial schema: every table in storage/models.py

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "baselines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("validated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("activated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("num_samples", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=True),
        sa.Column("validation", sa.JSON(), nullable=True),
        sa.Column("cluster_model", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_baselines_status"), "baselines", ["status"])

    op.create_table(
        "job_cursors",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "job_locks",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "samples",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=True),
        sa.Column("segment", sa.String(length=128), nullable=True),
        sa.Column("prompt_version", sa.String(length=128), nullable=True),
        sa.Column("model_version", sa.String(length=128), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("response", sa.Text(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("finish_reason", sa.String(length=32), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("tpot_ms", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("queue_ms", sa.Float(), nullable=True),
        sa.Column("mean_logprob", sa.Float(), nullable=True),
        sa.Column("mean_entropy", sa.Float(), nullable=True),
        sa.Column("tools", sa.JSON(), nullable=True),
        sa.Column("sample_weight", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=True),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_samples_ingested_at"), "samples", ["ingested_at"])
    op.create_index("ix_samples_segment_ts", "samples", ["segment", "timestamp"])
    op.create_index("ix_samples_tenant_ts", "samples", ["tenant", "timestamp"])
    op.create_index(op.f("ix_samples_timestamp"), "samples", ["timestamp"])

    op.create_table(
        "baseline_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("baseline_id", sa.Integer(), nullable=False),
        sa.Column("sample_id", sa.String(length=64), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("prompt_embedding", sa.LargeBinary(), nullable=True),
        sa.Column("response_embedding", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["baseline_id"], ["baselines.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_baseline_samples_baseline_id"), "baseline_samples", ["baseline_id"])

    op.create_table(
        "drift_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("baseline_id", sa.Integer(), nullable=True),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("num_samples", sa.Integer(), nullable=False),
        sa.Column("report_path", sa.Text(), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["baseline_id"], ["baselines.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("window_start", "window_end", name="uq_drift_run_window"),
    )
    op.create_table(
        "embeddings",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sample_id", sa.String(length=64), nullable=False),
        sa.Column("field", sa.String(length=16), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["sample_id"], ["samples.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("sample_id", "field", "model", name="uq_embedding"),
    )
    op.create_index(op.f("ix_embeddings_sample_id"), "embeddings", ["sample_id"])

    op.create_table(
        "eval_scores",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sample_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["sample_id"], ["samples.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("sample_id", "name", name="uq_eval_score"),
    )
    op.create_index(op.f("ix_eval_scores_sample_id"), "eval_scores", ["sample_id"])

    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dedupe_key", sa.String(length=256), nullable=False),
        sa.Column("rule", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("segment", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_notified", sa.DateTime(timezone=True), nullable=True),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["drift_runs.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_alerts_dedupe_key"), "alerts", ["dedupe_key"])
    op.create_index(op.f("ix_alerts_status"), "alerts", ["status"])

    op.create_table(
        "drift_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("test", sa.String(length=32), nullable=False),
        sa.Column("feature", sa.String(length=128), nullable=False),
        sa.Column("segment", sa.String(length=128), nullable=False),
        sa.Column("statistic", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("drifted", sa.Boolean(), nullable=False),
        sa.Column("insufficient", sa.Boolean(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["drift_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_drift_results_run_id"), "drift_results", ["run_id"])

    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("idempotency_key", sa.String(length=128), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("idempotency_key"),
    )
    op.create_index(op.f("ix_deliveries_alert_id"), "deliveries", ["alert_id"])
    op.create_index(op.f("ix_deliveries_next_attempt_at"), "deliveries", ["next_attempt_at"])
    op.create_index(op.f("ix_deliveries_status"), "deliveries", ["status"])


def downgrade() -> None:
    op.drop_index(op.f("ix_deliveries_status"), table_name="deliveries")
    op.drop_index(op.f("ix_deliveries_next_attempt_at"), table_name="deliveries")
    op.drop_index(op.f("ix_deliveries_alert_id"), table_name="deliveries")

    op.drop_table("deliveries")
    op.drop_index(op.f("ix_drift_results_run_id"), table_name="drift_results")

    op.drop_table("drift_results")
    op.drop_index(op.f("ix_alerts_status"), table_name="alerts")
    op.drop_index(op.f("ix_alerts_dedupe_key"), table_name="alerts")

    op.drop_table("alerts")
    op.drop_index(op.f("ix_eval_scores_sample_id"), table_name="eval_scores")

    op.drop_table("eval_scores")
    op.drop_index(op.f("ix_embeddings_sample_id"), table_name="embeddings")

    op.drop_table("embeddings")
    op.drop_table("drift_runs")
    op.drop_index(op.f("ix_baseline_samples_baseline_id"), table_name="baseline_samples")

    op.drop_table("baseline_samples")
    op.drop_index(op.f("ix_samples_timestamp"), table_name="samples")
    op.drop_index("ix_samples_tenant_ts", table_name="samples")
    op.drop_index("ix_samples_segment_ts", table_name="samples")
    op.drop_index(op.f("ix_samples_ingested_at"), table_name="samples")

    op.drop_table("samples")
    op.drop_table("job_locks")
    op.drop_table("job_cursors")
    op.drop_index(op.f("ix_baselines_status"), table_name="baselines")

    op.drop_table("baselines")
