"""The `silences` table: Alertmanager-style silences. Each holds label matchers (rule,
severity, tenant, segment, feature) with a start, an expiry, a creator and a comment; while one
matches every open member of an incident, the incident is not notified (it still shows)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.types import UTCDateTime


class Silence(Base):
    __tablename__ = "silences"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    matchers: Mapped[dict] = mapped_column(JSON)  # label -> glob pattern, all must match
    starts_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ends_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    created_by: Mapped[str] = mapped_column(String(128))
    comment: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
