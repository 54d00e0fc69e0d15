"""The sidecar's job bookkeeping: leader leases and incremental progress marks."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.types import UTCDateTime


class JobLock(Base):
    """Leader election for the sidecar's scheduler: one row per lock name, held by lease."""

    __tablename__ = "job_locks"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class JobCursor(Base):
    """Progress marks for incremental jobs (last sample seq embedded, last drift window, ...)."""

    __tablename__ = "job_cursors"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
