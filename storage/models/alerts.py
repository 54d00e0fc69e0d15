"""The alert tables: alerts, the on-call actions taken on them, and the webhook outbox."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    ForeignKey,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import SEGMENT_LABEL, Base
from storage.types import UTCDateTime


class Alert(Base):
    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dedupe_key: Mapped[str] = mapped_column(String(256), index=True)
    rule: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(32))  # one of vigil.alert_table.KINDS
    severity: Mapped[str] = mapped_column(String(16))  # moderate|high|critical|review
    segment: Mapped[str] = mapped_column(SEGMENT_LABEL, default="*")
    status: Mapped[str] = mapped_column(String(16), index=True)  # open|resolved
    summary: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict | None] = mapped_column(JSON)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("drift_runs.id"))
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    last_notified: Mapped[datetime | None] = mapped_column(UTCDateTime())
    occurrences: Mapped[int] = mapped_column(Integer, default=1)
    # lifecycle (alerts.lifecycle), each action also a row in alert_actions
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    acknowledged_by: Mapped[str | None] = mapped_column(String(128))
    snoozed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    silenced_severity: Mapped[str | None] = mapped_column(String(16))
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id"), index=True)


class AlertAction(Base):
    """Who did what to an alert, and when: acknowledge, snooze, resolve (with a note)."""

    __tablename__ = "alert_actions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"), index=True)
    action: Mapped[str] = mapped_column(String(16))  # acknowledge | snooze | resolve
    actor: Mapped[str] = mapped_column(String(128))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    severity: Mapped[str] = mapped_column(String(16))  # the alert's severity when it was done
    until: Mapped[datetime | None] = mapped_column(UTCDateTime())  # snooze end
    note: Mapped[str | None] = mapped_column(Text)


class Delivery(Base):
    """The webhook outbox: one row per (incident notification, target); alert_id: its lead."""

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"), index=True)
    incident_id: Mapped[int | None] = mapped_column(ForeignKey("incidents.id"), index=True)
    target: Mapped[str] = mapped_column(Text)
    format: Mapped[str] = mapped_column(String(16))  # generic|slack|pagerduty
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    payload: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), index=True)  # pending|delivered|dead
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
