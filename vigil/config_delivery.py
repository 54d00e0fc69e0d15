"""The settings of webhook delivery (alerts.delivery): targets, the signing secret, the rules
file, cool-down, retries with backoff, deadlines and parallel targets. Part of the one settings
object: `vigil.config.Settings` inherits these fields and checks."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

DEFAULT_SECRET = "vigil-dev-secret-change-me"


class DeliverySettings(BaseSettings):
    """A base of `vigil.config.Settings`, never used alone."""

    webhook_targets: list[str] = Field(default_factory=list)
    webhook_secret: str = DEFAULT_SECRET
    # the Slack app's signing secret: its Acknowledge buttons call back to /slack/actions
    slack_signing_secret: str | None = None
    alert_rules_path: Path | None = None
    alert_cooldown_s: int = Field(3600, ge=0)
    delivery_max_attempts: int = Field(8, gt=0)
    # outbox retries: delay after the n-th failure in [d/2, d], d = min(cap, base * 2**(n-1))
    delivery_backoff_base_s: float = Field(30.0, gt=0)
    delivery_backoff_cap_s: float = Field(3600.0, gt=0)
    delivery_timeout_s: float = Field(10.0, gt=0)  # one webhook POST
    delivery_poll_interval_s: float = Field(5.0, gt=0)
    delivery_deadline_s: float = Field(30.0, gt=0)  # one webhook call, connect to last byte
    delivery_max_response_bytes: int = Field(64 * 1024, gt=0)  # read at most this of a reply
    # targets sent to at once, each on its own thread: a slow receiver delays only itself
    delivery_parallel_targets: int = Field(16, gt=0)

    @field_validator("webhook_targets")
    @classmethod
    def _http_targets(cls, targets: list[str]) -> list[str]:
        for target in targets:
            if not target.startswith(("http://", "https://")):
                raise ValueError(f"{target!r} is not an http(s) URL")
        return targets
