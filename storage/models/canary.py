"""The canary tables: expected outputs with tolerances, canary runs and their probes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.types import UTCDateTime


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
    tolerances: Mapped[dict] = mapped_column(
        JSON
    )  # probe -> drift.detectors.canary.Tolerance fields
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
