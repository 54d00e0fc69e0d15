"""The `otlp_pending` table: the OTLP join buffer (sidecar.otlp.join_buffer).

A GenAI span whose content comes as log records, and log records whose span has not come yet,
wait here keyed by (sender, trace id, span id) (looked up by sender and span id), so the pair
may arrive in either order, in different requests, at different replicas. Each row expires
(`expires_at`); the otlp_join job writes expired spans as samples without text and deletes
expired log records.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.types import UTCDateTime


class OtlpPending(Base):
    __tablename__ = "otlp_pending"
    __table_args__ = (Index("ix_otlp_pending_key", "sender", "span_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sender: Mapped[str] = mapped_column(String(160))  # the tenant, or the key of a global key
    trace_id: Mapped[str] = mapped_column(String(32))  # hex
    span_id: Mapped[str] = mapped_column(String(16))  # hex
    kind: Mapped[str] = mapped_column(String(8))  # "span" (a mapped record) or "log" (content)
    body: Mapped[str] = mapped_column(Text)  # JSON
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
