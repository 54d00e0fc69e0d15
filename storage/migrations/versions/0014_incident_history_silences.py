"""incidents keep their opening severity and "this was expected" marks; silences

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

INCIDENT_COLUMNS = (
    ("opened_severity", sa.String(length=16)),
    ("expected_at", sa.DateTime(timezone=True)),
    ("expected_by", sa.String(length=128)),
    ("expected_note", sa.Text()),
    ("rebaseline_id", sa.Integer()),
)


def upgrade() -> None:
    for name, type_ in INCIDENT_COLUMNS:
        op.add_column("incidents", sa.Column(name, type_, nullable=True))
    op.execute("UPDATE incidents SET opened_severity = severity")
    op.create_table(
        "silences",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("matchers", sa.JSON(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_silences_ends_at"), "silences", ["ends_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_silences_ends_at"), table_name="silences")
    op.drop_table("silences")
    with op.batch_alter_table("incidents") as batch:
        for name, _type in reversed(INCIDENT_COLUMNS):
            batch.drop_column(name)
