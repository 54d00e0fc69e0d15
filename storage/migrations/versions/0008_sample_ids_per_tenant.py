"""sample ids per tenant

A record's `id` was unique across all tenants: tenant B sending tenant A's id was told
"duplicate" and its sample dropped, so B could squat A's ids and learn which exist. `samples`
gets `record_id` (the record's own id, filled from `id` for every stored row) and a unique
index on (record_id, tenant): ids are unique within a tenant. `id` stays the stored key the
child rows point at; a record whose id another tenant's row already holds is stored under a
`~<digest>` id (storage.repositories.samples). Existing rows keep their ids and child rows.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NOT NULL with a default: SQLite adds the column without rebuilding the table (a rebuild
    # would drop the CHECK triggers of 0003 and cascade into the child rows)
    op.add_column(
        "samples", sa.Column("record_id", sa.String(64), nullable=False, server_default="")
    )
    op.execute("UPDATE samples SET record_id = id")
    op.create_index("uq_samples_record_tenant", "samples", ["record_id", "tenant"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_samples_record_tenant", table_name="samples")
    op.drop_column("samples", "record_id")
