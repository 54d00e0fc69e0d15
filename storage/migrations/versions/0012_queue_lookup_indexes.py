"""indexes for the embed queue and the eval means, and planner statistics on SQLite

The embed job's queue asks, per sample, "is there any embedding by this model?"
(`samples_missing_embeddings`). Its equality terms are (sample_id, model), but the unique
index is (sample_id, field, model) and the other one (model, dim): without statistics SQLite
chose (model, dim), a walk over every embedding of the model for each sample (quadratic in
the table). `ix_embeddings_sample_model` answers the probe with both terms.
`ix_eval_scores_created_at` serves the sidecar's eval means over recently written scores
(a range on `created_at`), which otherwise read the whole table.

On SQLite the planner needs statistics (`sqlite_stat1`) to tell a selective index from an
unselective one: without them it guesses ~10 rows per value of any index, and joins a window
of samples to their embeddings by walking every embedding of the model (`embeddings.model` has
one value per model). ANALYZE records real statistics for tables that hold rows; tables still
empty get representative ones (a million rows, one per id or time value, half the table per
value of a label such as `model` or `segment`), which a later ANALYZE replaces.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_embeddings_sample_model": ("embeddings", ["sample_id", "model"]),
    "ix_eval_scores_created_at": ("eval_scores", ["created_at"]),
}


def upgrade() -> None:
    for name, (table, columns) in INDEXES.items():
        op.create_index(name, table, columns)
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ANALYZE")
        _seed_sqlite_stats(op.get_bind())


ROWS = 1_000_000
# columns whose value picks out one row or a few (ids, times); any other leading column is a
# label shared by many rows
SELECTIVE = {"id", "sample_id", "record_id", "timestamp", "ingested_at", "created_at", "draw"}


def _seed_sqlite_stats(conn) -> None:
    for table in ("samples", "embeddings", "eval_scores"):
        if conn.exec_driver_sql("SELECT 1 FROM sqlite_stat1 WHERE tbl = ?", (table,)).first():
            continue  # ANALYZE measured it
        for index in conn.exec_driver_sql(f"PRAGMA index_list('{table}')").all():
            name = index[1]
            columns = [row[2] for row in conn.exec_driver_sql(f"PRAGMA index_info('{name}')")]
            per_prefix, selective = [], False
            for column in columns:
                selective = selective or column in SELECTIVE
                per_prefix.append(2 if selective else ROWS // 2)
            stat = " ".join(str(n) for n in [ROWS, *per_prefix])
            conn.exec_driver_sql(
                "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (?, ?, ?)", (table, name, stat)
            )
        conn.exec_driver_sql(
            "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (?, NULL, ?)", (table, str(ROWS))
        )


def downgrade() -> None:
    for name, (table, _columns) in INDEXES.items():
        op.drop_index(name, table_name=table)
