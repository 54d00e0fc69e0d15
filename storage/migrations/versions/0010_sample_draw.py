"""samples.draw: each sample's fixed pseudo-random key for the capped window's row choice

A window larger than its row cap keeps, per segment, the rows with the smallest `draw`
(storage/draw.py), so the embed job can embed the rows the drift job will read before the
window closes. Existing rows get their draw here, in batches.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.draw import sample_draw

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

BATCH = 5000


def upgrade() -> None:
    op.add_column("samples", sa.Column("draw", sa.BigInteger(), nullable=True))
    bind = op.get_bind()
    samples = sa.table("samples", sa.column("id", sa.String), sa.column("draw", sa.BigInteger))
    update = (
        samples.update().where(samples.c.id == sa.bindparam("sid")).values(draw=sa.bindparam("d"))
    )
    while True:
        ids = (
            bind.execute(sa.select(samples.c.id).where(samples.c.draw.is_(None)).limit(BATCH))
            .scalars()
            .all()
        )
        if not ids:
            break
        bind.execute(update, [{"sid": i, "d": sample_draw(i)} for i in ids])


def downgrade() -> None:
    op.drop_column("samples", "draw")  # SQLite >= 3.35 drops a column in place
