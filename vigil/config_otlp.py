"""The settings of the OTLP receivers (sidecar.otlp): the per-span budget and the join buffer
that pairs a span with the GenAI content events its instrumentation sends as log records.
Part of the one settings object: `vigil.config.Settings` inherits these fields.

The join buffer lives in the database (`otlp_pending`), so a span and its log records may reach
different requests or different replicas. A span without text waits at most
`otlp_join_wait_s` for its logs, then becomes a sample without text; log records whose span never
comes are dropped after the same time. One sender holds at most `otlp_join_max_rows` waiting
rows: past that a span is stored at once without text and log records are refused (counted in
OTLP's partial_success).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class OtlpSettings(BaseSettings):
    """A base of `vigil.config.Settings`, never used alone."""

    otlp_max_span_attributes: int = Field(256, gt=0)  # more: the span is refused alone
    otlp_max_spans: int = Field(5_000, gt=0)  # spans (or log records) in one request
    otlp_join_wait_s: float = Field(30.0, gt=0)  # how long a span waits for its log records
    otlp_join_max_rows: int = Field(20_000, gt=0)  # waiting spans and log records per sender
    otlp_join_interval_s: int = Field(10, gt=0)  # the otlp_join job: expired spans written
