"""otlp_pending: the OTLP join buffer of spans and the log records that carry their content

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "otlp_pending",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sender", sa.String(length=160), nullable=False),
        sa.Column("trace_id", sa.String(length=32), nullable=False),
        sa.Column("span_id", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_otlp_pending_key", "otlp_pending", ["sender", "span_id"])
    op.create_index(op.f("ix_otlp_pending_expires_at"), "otlp_pending", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_otlp_pending_expires_at"), table_name="otlp_pending")
    op.drop_index("ix_otlp_pending_key", table_name="otlp_pending")
    op.drop_table("otlp_pending")
