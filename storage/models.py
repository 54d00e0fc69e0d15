"""SQLAlchemy 2.0 tables. One sample record shape everywhere (docs/architecture.md); the schema
itself is built by the Alembic migrations in `storage/migrations`, never by `create_all`
outside them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from storage.draw import sample_draw
from storage.types import UTCDateTime
from vigil.sample_record.limits import MAX_SEGMENT_LABEL_CHARS

# a drift segment label, `<key>=<value>`; declared 128 on SQLite, which does not enforce it
# (migration 0006 widens PostgreSQL only)
SEGMENT_LABEL = String(MAX_SEGMENT_LABEL_CHARS).with_variant(String(128), "sqlite")


class Base(DeclarativeBase):
    pass


def _record_id_default(context) -> str:
    return context.get_current_parameters()["id"]


class Sample(Base):
    """One logged request (engine sampler or ingest API). (`tenant`, `record_id`) is the
    idempotency key: the record's own id, unique within its tenant. `id`, the stored id that
    child rows point at, is the record id, or `~<digest>` when another tenant's row holds that id
    (storage.repositories.samples.insert_samples)."""

    __tablename__ = "samples"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # the record's `id` as sent (migration 0008); the default covers rows built without it
    record_id: Mapped[str] = mapped_column(
        String(64), server_default="", default=_record_id_default
    )
    timestamp: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    tenant: Mapped[str | None] = mapped_column(String(128))
    segment: Mapped[str | None] = mapped_column(String(128))
    prompt_version: Mapped[str | None] = mapped_column(String(128))
    model_version: Mapped[str | None] = mapped_column(String(128))
    prompt: Mapped[str | None] = mapped_column(Text)
    response: Mapped[str | None] = mapped_column(Text)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    queue_ms: Mapped[float | None] = mapped_column(Float)
    mean_logprob: Mapped[float | None] = mapped_column(Float)
    mean_entropy: Mapped[float | None] = mapped_column(Float)
    tools: Mapped[list | None] = mapped_column(JSON)
    sample_weight: Mapped[float] = mapped_column(Float, default=1.0)
    source: Mapped[str] = mapped_column(String(32), default="engine")  # engine | ingest
    extra: Mapped[dict | None] = mapped_column(JSON)
    ingested_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    # a fixed pseudo-random key from the id (storage.draw): a capped window keeps the rows with
    # the smallest draws per segment, so the choice is known before the window is complete
    draw: Mapped[int | None] = mapped_column(
        BigInteger, default=lambda ctx: sample_draw(ctx.get_current_parameters()["id"])
    )

    __table_args__ = (
        Index("ix_samples_segment_ts", "segment", "timestamp"),
        Index("ix_samples_tenant_ts", "tenant", "timestamp"),
        # ids per tenant; rows without a tenant are kept unique by insert_samples (NULLs differ)
        Index("uq_samples_record_tenant", "record_id", "tenant", unique=True),
        # the record schema's hard bounds (vigil.sample_record.limits); on SQLite migration 0003
        # makes them triggers (adding a CHECK there means a table rebuild)
        CheckConstraint(
            "sample_weight > 0 AND sample_weight <= 1000000.0",
            name="ck_samples_sample_weight_range",
        ),
        CheckConstraint(
            "(prompt_tokens IS NULL OR prompt_tokens >= 0) "
            "AND (completion_tokens IS NULL OR completion_tokens >= 0)",
            name="ck_samples_token_counts",
        ),
    )


class Embedding(Base):
    __tablename__ = "embeddings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # looked up through the unique constraint's index, which leads with sample_id
    sample_id: Mapped[str] = mapped_column(ForeignKey("samples.id", ondelete="CASCADE"))
    field: Mapped[str] = mapped_column(String(16))  # prompt | response
    model: Mapped[str] = mapped_column(String(128))
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)  # float32, little-endian, `dim` values

    __table_args__ = (
        UniqueConstraint("sample_id", "field", "model", name="uq_embedding"),
        Index("ix_embeddings_model_dim", "model", "dim"),  # one model's vectors; its dimension
        # the embed queue's probe "any vector of this sample by this model?" (both terms)
        Index("ix_embeddings_sample_model", "sample_id", "model"),
    )


class EvalScore(Base):
    __tablename__ = "eval_scores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # looked up through the unique constraint's index, which leads with sample_id
    sample_id: Mapped[str] = mapped_column(ForeignKey("samples.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))  # e.g. judge, relevancy, refusal
    score: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    detail: Mapped[dict | None] = mapped_column(JSON)

    __table_args__ = (
        UniqueConstraint("sample_id", "name", name="uq_eval_score"),
        Index("ix_eval_scores_created_at", "created_at"),  # eval means over recent scores
    )


class Baseline(Base):
    __tablename__ = "baselines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(
        String(16), index=True
    )  # candidate|validated|rejected|active|retired
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    validated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    activated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    num_samples: Mapped[int] = mapped_column(Integer, default=0)
    # frozen PSI bin edges, calibrated thresholds, validation reasons (JSON)
    spec: Mapped[dict | None] = mapped_column(JSON)
    validation: Mapped[dict | None] = mapped_column(JSON)
    cluster_model: Mapped[bytes | None] = mapped_column(LargeBinary)


class BaselineSample(Base):
    """A bounded frozen copy of the samples a baseline was built from (survives retention)."""

    __tablename__ = "baseline_samples"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    baseline_id: Mapped[int] = mapped_column(
        ForeignKey("baselines.id", ondelete="CASCADE"), index=True
    )
    sample_id: Mapped[str] = mapped_column(String(64))
    record: Mapped[dict] = mapped_column(JSON)  # the sample fields, without embeddings
    prompt_embedding: Mapped[bytes | None] = mapped_column(LargeBinary)
    response_embedding: Mapped[bytes | None] = mapped_column(LargeBinary)


class DriftRun(Base):
    __tablename__ = "drift_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    baseline_id: Mapped[int | None] = mapped_column(ForeignKey("baselines.id"))
    window_start: Mapped[datetime] = mapped_column(UTCDateTime())
    window_end: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(16))  # running | done | failed | skipped
    num_samples: Mapped[int] = mapped_column(Integer, default=0)
    report_path: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[dict | None] = mapped_column(JSON)
    # claims of this window, counted at claim time (migration 0002): a crash still counts
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    __table_args__ = (UniqueConstraint("window_start", "window_end", name="uq_drift_run_window"),)


class DriftResult(Base):
    """One row per test x feature x segment."""

    __tablename__ = "drift_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("drift_runs.id", ondelete="CASCADE"), index=True)
    test: Mapped[str] = mapped_column(String(32))
    feature: Mapped[str] = mapped_column(String(128))
    segment: Mapped[str] = mapped_column(SEGMENT_LABEL, default="*")
    statistic: Mapped[float | None] = mapped_column(Float)
    p_value: Mapped[float | None] = mapped_column(Float)
    threshold: Mapped[float | None] = mapped_column(Float)
    drifted: Mapped[bool] = mapped_column(default=False)
    insufficient: Mapped[bool] = mapped_column(default=False)
    detail: Mapped[dict | None] = mapped_column(JSON)


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


class CanaryBaseline(Base):
    """Expected canary outputs (calibration runs) and per-probe tolerances from measured noise."""

    __tablename__ = "canary_baselines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(16), index=True)  # active | retired
    probe_set_version: Mapped[str] = mapped_column(String(64))
    model_version: Mapped[str | None] = mapped_column(String(128))
    engine: Mapped[dict | None] = mapped_column(JSON)  # engine version, torch, device, dtype
    expected: Mapped[dict] = mapped_column(JSON)  # probe -> {token_ids, logprobs, perplexity}
    tolerances: Mapped[dict] = mapped_column(JSON)  # probe -> drift.canary.Tolerance fields
    calibration: Mapped[dict | None] = mapped_column(JSON)  # noise measured per probe


class CanaryRun(Base):
    __tablename__ = "canary_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    baseline_id: Mapped[int | None] = mapped_column(ForeignKey("canary_baselines.id"), index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(16))  # ok | mismatch | calibration | failed
    model_version: Mapped[str | None] = mapped_column(String(128))
    engine: Mapped[dict | None] = mapped_column(JSON)
    summary: Mapped[dict | None] = mapped_column(JSON)


class CanaryResult(Base):
    """One probe in one canary run: what the engine gave and how it compared."""

    __tablename__ = "canary_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(
        ForeignKey("canary_runs.id", ondelete="CASCADE"), index=True
    )
    probe: Mapped[str] = mapped_column(String(128))
    token_ids: Mapped[list] = mapped_column(JSON)
    token_hash: Mapped[str] = mapped_column(String(64))
    logprobs: Mapped[list] = mapped_column(JSON)
    perplexity: Mapped[float | None] = mapped_column(Float)
    comparison: Mapped[dict | None] = mapped_column(JSON)
    ok: Mapped[bool | None] = mapped_column()

    __table_args__ = (UniqueConstraint("run_id", "probe", name="uq_canary_result_probe"),)


from storage.incident_model import Incident  # noqa: E402,F401  (own file; registered on Base)
from storage.page_session import PageSession  # noqa: E402,F401  (its table belongs to Base.metadata)
