"""eval scores: an index on (sample_id, name, score)

The eval reads (the dashboard's bucketed eval series, the drift job's capped eval read) join
`eval_scores` to `samples` on sample_id and read name and score. With score in the index those
reads never visit the table rows.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_eval_scores_sample_name_score", "eval_scores", ["sample_id", "name", "score"])


def downgrade() -> None:
    op.drop_index("ix_eval_scores_sample_name_score", table_name="eval_scores")
