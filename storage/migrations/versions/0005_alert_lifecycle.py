"""alert lifecycle: acknowledge, snooze, resolve notes, action history

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ADD COLUMN on both backends: a SQLite table rebuild would drop `alerts`, and with
    # foreign keys on that cascades into `deliveries`
    op.add_column("alerts", sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("alerts", sa.Column("acknowledged_by", sa.String(length=128), nullable=True))
    op.add_column("alerts", sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True))
    op.add_column("alerts", sa.Column("silenced_severity", sa.String(length=16), nullable=True))
    op.create_table(
        "alert_actions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_alert_actions_alert_id"), "alert_actions", ["alert_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_alert_actions_alert_id"), table_name="alert_actions")
    op.drop_table("alert_actions")
    for column in ("silenced_severity", "snoozed_until", "acknowledged_by", "acknowledged_at"):
        op.drop_column("alerts", column)  # SQLite >= 3.35 drops a column in place
