"""The declarative base every table registers on, and the column types tables share."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import String, Table
from sqlalchemy.orm import DeclarativeBase

from vigil.sample_record.limits import MAX_SEGMENT_LABEL_CHARS

# a drift segment label, `<key>=<value>`; declared 128 on SQLite, which does not enforce it
# (migration 0006 widens PostgreSQL only)
SEGMENT_LABEL = String(MAX_SEGMENT_LABEL_CHARS).with_variant(String(128), "sqlite")


class Base(DeclarativeBase):
    if TYPE_CHECKING:
        # every table here is declared on the class, so its `__table__` is a `Table` (the
        # stubs say `FromClause`, which also covers mappings onto joins and selects)
        __table__: ClassVar[Table]
