"""sample record: bounds and embedding ownership

`samples` gets CHECK constraints for the record schema's hard bounds (sample_weight in
(0, 1e6], token counts >= 0), so no writer can store what the schema refuses; `embeddings`
gets an index on (model, dim): reading one model's vectors, and the first stored dimension of
a `client:` model, without a scan.

SQLite cannot add a CHECK constraint without rebuilding the table, and a rebuild drops
`samples`, which with foreign keys on cascades into embeddings and eval scores: there the same
conditions are BEFORE INSERT/UPDATE triggers that abort the statement (an IntegrityError, as
the constraint is on PostgreSQL).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# name -> condition; the same names and conditions as storage/models/samples.py (Sample)
CHECKS = {
    "ck_samples_sample_weight_range": "sample_weight > 0 AND sample_weight <= 1000000.0",
    "ck_samples_token_counts": "(prompt_tokens IS NULL OR prompt_tokens >= 0) "
                               "AND (completion_tokens IS NULL OR completion_tokens >= 0)",
}  # fmt: skip


def upgrade() -> None:
    # rows an earlier, laxer validator let in are brought within the bounds first
    op.execute("UPDATE samples SET sample_weight = 1000000.0 WHERE sample_weight > 1000000.0")
    op.execute("UPDATE samples SET prompt_tokens = NULL WHERE prompt_tokens < 0")
    op.execute("UPDATE samples SET completion_tokens = NULL WHERE completion_tokens < 0")
    if op.get_bind().dialect.name == "sqlite":
        for name, condition in CHECKS.items():
            for event in ("INSERT", "UPDATE"):
                op.execute(
                    f"CREATE TRIGGER {name}_{event.lower()} BEFORE {event} ON samples "
                    f"WHEN NOT ({_new(condition)}) "
                    f"BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: {name}'); END"
                )
    else:
        for name, condition in CHECKS.items():
            op.create_check_constraint(name, "samples", condition)
    op.create_index("ix_embeddings_model_dim", "embeddings", ["model", "dim"])


def downgrade() -> None:
    op.drop_index("ix_embeddings_model_dim", table_name="embeddings")
    if op.get_bind().dialect.name == "sqlite":
        for name in CHECKS:
            for event in ("insert", "update"):
                op.execute(f"DROP TRIGGER IF EXISTS {name}_{event}")
    else:
        for name in CHECKS:
            op.drop_constraint(name, "samples", type_="check")


def _new(condition: str) -> str:
    """The condition over the row being written (`NEW.column`), for a trigger."""
    for column in ("sample_weight", "prompt_tokens", "completion_tokens"):
        condition = condition.replace(column, f"NEW.{column}")
    return condition
