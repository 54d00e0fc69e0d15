"""The sample tables: one logged request (`samples`), its embeddings and its eval scores."""

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
from sqlalchemy.orm import Mapped, mapped_column

from storage.draw import sample_draw
from storage.hour import sample_hour
from storage.models.base import Base
from storage.types import UTCDateTime


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
    # the timestamp's hour bucket (storage.hour): a one-hour window reads its kept rows by index
    hour: Mapped[int | None] = mapped_column(
        Integer, default=lambda ctx: sample_hour(ctx.get_current_parameters()["timestamp"])
    )

    __table_args__ = (
        Index("ix_samples_segment_ts", "segment", "timestamp"),
        Index("ix_samples_tenant_ts", "tenant", "timestamp"),
        # a whole-hours window: per-segment counts and weights from the index alone, and each
        # segment's smallest draws as one range (storage.repositories.window_cap)
        Index("ix_samples_hour_segment_draw", "hour", "segment", "draw", "sample_weight"),
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
