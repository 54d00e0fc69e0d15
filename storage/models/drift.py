"""The drift tables: baselines (with their frozen samples), drift runs and their results."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import SEGMENT_LABEL, Base
from storage.types import UTCDateTime


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
