"""The settings that bound what one tenant can do to the monitor: the keys of each role (tenant,
operator, admin; global keys are `api_keys`), the ingest policy (weights, timestamps, eval
scores) and the per-tenant ingest quota. Part of the one settings object: `vigil.config.Settings`
inherits these fields and checks."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from vigil.keys import bare_key
from vigil.sample_record.names import name_problem

DEFAULT_DEV_OPERATOR_KEY = "vigil-dev-operator-key"
DEFAULT_MAX_PAST_SKEW_S = 7200.0
DEFAULT_WEIGHT_SPREAD = 10.0
DEFAULT_EVAL_BOUND = 100.0
DEFAULT_ROWS_PER_MINUTE = 60_000
DEFAULT_BYTES_PER_MINUTE = 64 * 1024 * 1024  # ~1 MB/s: 60,000 rows of 1 KB


class TenancySettings(BaseSettings):
    """A base of `vigil.config.Settings`, never used alone: its checks read `env`,
    `binds_publicly` and `api_keys` from there."""

    if TYPE_CHECKING:  # declared for type checkers only: at run time `Settings` defines them
        env: str
        api_keys: list[str]

        @property
        def binds_publicly(self) -> bool: ...

    tenant_keys: dict[str, str] = Field(default_factory=dict)  # key -> the one tenant it may write
    admin_keys: list[str] = Field(default_factory=list)  # baseline/alert actions, all pages
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
    eval_default_bound: float = Field(
        DEFAULT_EVAL_BOUND, gt=0
    )  # unknown evaluators: |score| <= this
    # rows one tenant may ingest per minute (a key without a tenant counts as its own); past it
    # a 429 with Retry-After; 0: no limit
    ingest_rows_per_minute: int = Field(DEFAULT_ROWS_PER_MINUTE, ge=0)
    # bytes one tenant may ingest per minute, counted as the stored records' JSON size (texts,
    # vectors, unknown fields); past it a 429 with Retry-After; 0: no limit
    ingest_bytes_per_minute: int = Field(DEFAULT_BYTES_PER_MINUTE, ge=0)

    @field_validator("tenant_keys")
    @classmethod
    def _tenant_names_are_safe(cls, keys: dict[str, str]) -> dict[str, str]:
        """A tenant name labels every record, page and alert of its tenant: the record's safe
        name characters only (vigil.sample_record NAME_CHARS), 1-128 of them."""
        for tenant in keys.values():
            problem = name_problem(tenant) if len(tenant) <= 128 else "is over 128 characters"
            if problem:
                raise ValueError(f"VIGIL_TENANT_KEYS: the tenant {tenant[:40]!r} {problem}")
        return keys

    @field_validator("eval_scales")
    @classmethod
    def _ordered_scales(
        cls, scales: dict[str, tuple[float, float]]
    ) -> dict[str, tuple[float, float]]:
        for name, (low, high) in scales.items():
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ValueError(f"{name!r}: a scale is [low, high] with finite low < high")
        return scales

    @model_validator(mode="after")
    def _development_operator_key(self) -> TenancySettings:
        # the sidecar's judge and canaries mark their requests internal, which takes an operator
        # key: a local development set-up gets one unless operator keys are configured
        if (
            "operator_keys" not in self.model_fields_set
            and self.env == "development"
            and not self.binds_publicly
        ):
            self.operator_keys = [DEFAULT_DEV_OPERATOR_KEY]
        return self

    @model_validator(mode="after")
    def _keys_have_one_role(self) -> TenancySettings:
        # a key listed twice would carry the wider of its two roles: refuse the ambiguity
        seen: dict[str, str] = {}
        for name, values in self.key_lists().items():
            for key in values:
                if key in seen and seen[key] != name:
                    raise ValueError(f"a key appears in both {seen[key]} and {name}")
                seen[key] = name
        return self

    def key_lists(self) -> dict[str, list[str]]:
        """Each key variable -> its keys, without their `name:` prefixes."""
        return {
            "VIGIL_API_KEYS": [bare_key(k) for k in self.api_keys],
            "VIGIL_TENANT_KEYS": [bare_key(k) for k in self.tenant_keys],
            "VIGIL_OPERATOR_KEYS": [bare_key(k) for k in self.operator_keys],
            "VIGIL_ADMIN_KEYS": [bare_key(k) for k in self.admin_keys],
        }
