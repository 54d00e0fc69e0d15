"""segment labels up to 256 characters in drift_results and alerts

A drift segment label is `<key>=<value>` (`prompt_version=` + a 128-character value is 143
characters), so a long tenant, segment or version name failed the drift run's insert on
PostgreSQL and the window went unmonitored.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLES = ("drift_results", "alerts")


def upgrade() -> None:
    # SQLite does not enforce a VARCHAR length, and changing the declared one would rebuild
    # `alerts`, whose drop cascades into `deliveries`: PostgreSQL only (see SEGMENT_LABEL)
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.alter_column(
            table,
            "segment",
            type_=sa.String(256),
            existing_type=sa.String(128),
            existing_nullable=False,
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.alter_column(
            table,
            "segment",
            type_=sa.String(128),
            existing_type=sa.String(256),
            existing_nullable=False,
        )
