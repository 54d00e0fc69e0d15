"""drift windows: attempts counted when a window is claimed

`drift_runs.attempts` counts the claims of a window. It is incremented in the claim's own
transaction, before any work, so a job killed mid-window (out of memory, SIGKILL) still leaves
its attempt behind: after MAX_ATTEMPTS claims the window is given up with a monitoring alert
instead of being claimed again forever.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a plain ADD COLUMN on both backends (no SQLite table rebuild: alerts and results point here)
    op.add_column(
        "drift_runs", sa.Column("attempts", sa.Integer(), nullable=False, server_default="0")
    )


def downgrade() -> None:
    with op.batch_alter_table("drift_runs") as batch:
        batch.drop_column("attempts")
