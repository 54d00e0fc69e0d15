"""samples.hour: each sample's hour bucket, and the index a capped one-hour window reads by

A drift window is an hour. Counting its segments and finding each capped segment's smallest
draws used to visit every row of the hour; with `hour` (storage/hour.py) and the index
(hour, segment, draw, sample_weight) the counts come from the index alone and each segment's
kept rows are one index range. Existing rows get their hour here, in batches by id.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.hour import sample_hour
from storage.types import UTCDateTime

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

BATCH = 5000
INDEX = "ix_samples_hour_segment_draw"
COLUMNS = ["hour", "segment", "draw", "sample_weight"]
# SQLite statistics for the index while `samples` is empty (as migration 0012 seeds them):
# a million rows, about a thousand an hour, half of those per segment
SEEDED_STAT = "1000000 1000 500 2 2"


def upgrade() -> None:
    op.add_column("samples", sa.Column("hour", sa.Integer(), nullable=True))
    _backfill(op.get_bind())
    op.create_index(INDEX, "samples", COLUMNS)
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _sqlite_stats(bind)


def _backfill(bind) -> None:
    samples = sa.table(
        "samples",
        sa.column("id", sa.String),
        sa.column("timestamp", UTCDateTime()),
        sa.column("hour", sa.Integer),
    )
    update = (
        samples.update().where(samples.c.id == sa.bindparam("sid")).values(hour=sa.bindparam("h"))
    )
    last: str | None = None
    while True:  # keyset over the primary key: each batch starts where the last one ended
        query = sa.select(samples.c.id, samples.c.timestamp).order_by(samples.c.id).limit(BATCH)
        if last is not None:
            query = query.where(samples.c.id > last)
        rows = bind.execute(query).all()
        if not rows:
            break
        bind.execute(update, [{"sid": i, "h": sample_hour(ts)} for i, ts in rows])
        last = rows[-1][0]


def _has_stat_table(bind) -> bool:
    found = bind.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'"
    ).first()
    return found is not None


def _sqlite_stats(bind) -> None:
    if not _has_stat_table(bind):
        return
    if bind.exec_driver_sql("SELECT 1 FROM samples LIMIT 1").first():
        op.execute("ANALYZE samples")  # measured statistics for a table that holds rows
        return
    bind.exec_driver_sql(
        "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('samples', ?, ?)", (INDEX, SEEDED_STAT)
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="samples")
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and _has_stat_table(bind):
        bind.exec_driver_sql("DELETE FROM sqlite_stat1 WHERE idx = ?", (INDEX,))
    op.drop_column("samples", "hour")  # SQLite >= 3.35 drops a column in place
