"""The `incidents` table: one event that pages once. A drift run's firing alerts (or one
engine/monitor condition) are its members (`alerts.incident_id`); notifications go out per
incident, never per member (`alerts/incidents.py`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.types import UTCDateTime


class Incident(Base):
    __tablename__ = "incidents"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # what joins alerts into it while it is open: `drift` (a traffic or model event), `engine`
    # (canaries) or a condition's rule|segment
    group_key: Mapped[str] = mapped_column(String(300), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)  # open | resolved
    # the highest severity its uninhibited members reached; resolving members never lowers it
    severity: Mapped[str] = mapped_column(String(16))
    opened_severity: Mapped[str | None] = mapped_column(String(16))  # at its first notification
    kind: Mapped[str] = mapped_column(String(32))  # the leading member's kind
    headline: Mapped[str] = mapped_column(Text)  # the cause in one sentence
    cause: Mapped[dict | None] = mapped_column(JSON)  # what the headline was built from
    run_id: Mapped[int | None] = mapped_column(ForeignKey("drift_runs.id"))  # latest run
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # the severity last told to the targets; a rise or the resolve is told again, nothing else
    notified_severity: Mapped[str | None] = mapped_column(String(16))
    last_notified: Mapped[datetime | None] = mapped_column(UTCDateTime())
    notifications: Mapped[int] = mapped_column(Integer, default=0)
    notified_targets: Mapped[list | None] = mapped_column(JSON)  # names; they get the resolve
    # another open incident that suppresses this one's notifications (a failing canary)
    inhibited_by: Mapped[int | None] = mapped_column(Integer)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    acknowledged_by: Mapped[str | None] = mapped_column(String(128))
    snoozed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    silenced_severity: Mapped[str | None] = mapped_column(String(16))
    # "this was expected": who marked it, when, why; a new baseline is built from the traffic
    # after `expected_at` once enough has come (`alerts.expected`), then the incident resolves
    expected_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    expected_by: Mapped[str | None] = mapped_column(String(128))
    expected_note: Mapped[str | None] = mapped_column(Text)
    rebaseline_id: Mapped[int | None] = mapped_column(Integer)  # the baseline built for it
