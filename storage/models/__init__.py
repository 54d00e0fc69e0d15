"""SQLAlchemy 2.0 tables. One sample record shape everywhere (docs/architecture.md); the schema
itself is built by the Alembic migrations in `storage/migrations`, never by `create_all`
outside them.

Importing this package registers every table on `Base.metadata`; the tables live one family
per module (samples, drift, alerts, incident, jobs, canary, page_session) and are all
importable from here."""

from __future__ import annotations

from storage.models.alerts import Alert, AlertAction, Delivery
from storage.models.base import SEGMENT_LABEL, Base
from storage.models.canary import CanaryBaseline, CanaryResult, CanaryRun
from storage.models.drift import Baseline, BaselineSample, DriftResult, DriftRun
from storage.models.incident import Incident
from storage.models.jobs import JobCursor, JobLock
from storage.models.otlp_pending import OtlpPending
from storage.models.page_session import PageSession
from storage.models.samples import Embedding, EvalScore, Sample
from storage.models.silence import Silence

__all__ = [
    "SEGMENT_LABEL",
    "Alert",
    "AlertAction",
    "Base",
    "Baseline",
    "BaselineSample",
    "CanaryBaseline",
    "CanaryResult",
    "CanaryRun",
    "Delivery",
    "DriftResult",
    "DriftRun",
    "Embedding",
    "EvalScore",
    "Incident",
    "JobCursor",
    "JobLock",
    "OtlpPending",
    "PageSession",
    "Sample",
    "Silence",
]
