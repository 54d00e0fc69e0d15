"""incidents: one event, one notification; alerts and deliveries name their incident

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("group_key", sa.String(length=300), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("headline", sa.Text(), nullable=False),
        sa.Column("cause", sa.JSON(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("notified_severity", sa.String(length=16), nullable=True),
        sa.Column("last_notified", sa.DateTime(timezone=True), nullable=True),
        sa.Column("notifications", sa.Integer(), nullable=False),
        sa.Column("notified_targets", sa.JSON(), nullable=True),
        sa.Column("inhibited_by", sa.Integer(), nullable=True),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("acknowledged_by", sa.String(length=128), nullable=True),
        sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("silenced_severity", sa.String(length=16), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["drift_runs.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_incidents_group_key"), "incidents", ["group_key"])
    op.create_index(op.f("ix_incidents_status"), "incidents", ["status"])
    # ADD COLUMN ... REFERENCES: no SQLite table rebuild (see 0005), which Alembic's add_column
    # with a foreign key would need there
    for table in ("alerts", "deliveries"):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(
                f"ALTER TABLE {table} ADD COLUMN incident_id INTEGER REFERENCES incidents (id)"
            )
        else:
            op.add_column(table, sa.Column("incident_id", sa.Integer(), nullable=True))
            op.create_foreign_key(
                f"fk_{table}_incident_id", table, "incidents", ["incident_id"], ["id"]
            )
        op.create_index(op.f(f"ix_{table}_incident_id"), table, ["incident_id"])


def downgrade() -> None:
    for table in ("deliveries", "alerts"):
        op.drop_index(op.f(f"ix_{table}_incident_id"), table_name=table)
        if op.get_bind().dialect.name == "postgresql":
            op.drop_constraint(f"fk_{table}_incident_id", table, type_="foreignkey")
        op.drop_column(table, "incident_id")
    op.drop_index(op.f("ix_incidents_status"), table_name="incidents")
    op.drop_index(op.f("ix_incidents_group_key"), table_name="incidents")
    op.drop_table("incidents")
