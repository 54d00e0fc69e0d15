"""The declarative base every table registers on, and the column types tables share."""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase

from vigil.sample_record.limits import MAX_SEGMENT_LABEL_CHARS

# a drift segment label, `<key>=<value>`; declared 128 on SQLite, which does not enforce it
# (migration 0006 widens PostgreSQL only)
SEGMENT_LABEL = String(MAX_SEGMENT_LABEL_CHARS).with_variant(String(128), "sqlite")


class Base(DeclarativeBase):
    pass
