"""drop the single-column sample_id indexes of eval_scores and embeddings

Each table's unique constraint leads with sample_id ((sample_id, name) and (sample_id, field,
model)), and its index serves every lookup by sample and the cascade from samples; the extra
index only cost space and a write per inserted row.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

INDEXES = {"eval_scores": "ix_eval_scores_sample_id", "embeddings": "ix_embeddings_sample_id"}


def upgrade() -> None:
    for table, index in INDEXES.items():
        op.drop_index(index, table_name=table)


def downgrade() -> None:
    for table, index in INDEXES.items():
        op.create_index(index, table, ["sample_id"])
