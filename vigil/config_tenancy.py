"""The settings that bound what one tenant can do to the monitor: operator keys, the ingest
policy (weights, timestamps, eval scores) and the per-tenant ingest quota. Part of the one
settings object: `vigil.config.Settings` inherits these fields."""

from __future__ import annotations

import math

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

DEFAULT_DEV_OPERATOR_KEY = "vigil-dev-operator-key"
DEFAULT_MAX_PAST_SKEW_S = 7200.0
DEFAULT_WEIGHT_SPREAD = 10.0
DEFAULT_EVAL_BOUND = 100.0
DEFAULT_ROWS_PER_MINUTE = 60_000


class TenancySettings(BaseSettings):
    # gateways, importers and the sidecar's own judge and canaries: may label traffic for any
    # tenant/segment, mark it internal (X-Vigil-Internal) and backfill old timestamps
    # (default: none; in development on loopback the development operator key)
    operator_keys: list[str] = Field(default_factory=list)
    # ingest weights are clipped to [r / spread, r * spread] around the engine's own r = 1/rate
    ingest_weight_spread: float = Field(DEFAULT_WEIGHT_SPREAD, ge=1.0)
    # ingest from tenant and global keys: a sample older than now minus this is refused
    # (operator and admin keys may backfill)
    max_past_skew_s: float = Field(DEFAULT_MAX_PAST_SKEW_S, gt=0)
    # evaluator -> [low, high]: an ingested score outside its evaluator's scale is refused;
    # merged over the built-in evaluators' scales (sidecar.evals.scales)
    eval_scales: dict[str, tuple[float, float]] = Field(default_factory=dict)
    eval_default_bound: float = Field(DEFAULT_EVAL_BOUND, gt=0)  # unknown evaluators: |score| <= this
    # rows one tenant may ingest per minute (a key without a tenant counts as its own); past it
    # a 429 with Retry-After; 0: no limit
    ingest_rows_per_minute: int = Field(DEFAULT_ROWS_PER_MINUTE, ge=0)

    @field_validator("eval_scales")
    @classmethod
    def _ordered_scales(cls, scales: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, (low, high) in scales.items():
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(f"{name!r}: a scale is [low, high] with finite low < high")
        return scales
