"""The one write path of every ingest route (`POST /v1/ingest`, the OTLP receiver): the
caller's rules (sidecar.ingest.policy), its quota (sidecar.ingest.quota), the one redaction
step (vigil.record_redaction, which storage's writer applies to the engine's traffic), then
storage."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException

from sidecar.ingest.policy import IngestPolicy
from sidecar.ingest.quota import BYTES, IngestQuota, retry_after_seconds
from sidecar.ingest.schema import IngestResult
from storage.types import utcnow
from vigil.config import Settings
from vigil.keys import Principal
from vigil.record_redaction import RecordRedaction
from vigil.sample_record import SampleRecord


@dataclass
class IngestPath:
    settings: Settings
    session_factory: sessionmaker[Session]
    policy: IngestPolicy
    quota: IngestQuota
    redaction: RecordRedaction

    @classmethod
    def from_settings(
        cls, settings: Settings, session_factory: sessionmaker[Session]
    ) -> IngestPath:
        return cls(
            settings,
            session_factory,
            IngestPolicy.from_settings(settings),
            IngestQuota(
                settings.ingest_rows_per_minute,
                bytes_per_minute=settings.ingest_bytes_per_minute,
            ),
            RecordRedaction.from_settings(settings),
        )

    def store(
        self, samples: list[SampleRecord], principal: Principal, *, metered: bool = True
    ) -> IngestResult:
        """Check, meter and store `samples` for `principal`; HTTPException (403/413/422/429) on
        a refusal, in which case nothing is stored. Idempotent on (tenant, `id`). `metered`
        False: rows already counted by `meter` (the OTLP join buffer's spans)."""
        from sidecar.ingest.records import ingest_records

        settings = self.settings
        if len(samples) > settings.ingest_max_samples:
            raise HTTPException(
                413,
                f"{len(samples)} samples in one request; the limit is "
                f"{settings.ingest_max_samples} (VIGIL_INGEST_MAX_SAMPLES): split the batch",
            )
        now = utcnow()
        clipped = self.policy.apply(samples, principal, now)
        if metered:
            self.meter(principal, len(samples), sum(len(record_json(x)) for x in samples))
        for sample in samples:  # the one redaction step (vigil.record_redaction)
            self.redaction.sample(sample)
        with self.session_factory() as session:
            result = ingest_records(
                session, samples, now=now, max_future_skew_s=settings.max_future_skew_s
            )
            session.commit()
        result.weights_clipped = clipped
        return result

    @staticmethod
    def sender(principal: Principal) -> str:
        """Whom a quota counts: the tenant, or a key without one."""
        return principal.tenant or f"key:{principal.key_id}"

    def meter(self, principal: Principal, rows: int, nbytes: int = 0) -> None:
        """Count `rows` and `nbytes` against the caller's quota, or raise 429 (nothing counted).
        Operator and admin imports are not metered."""
        if principal.may_label_others:
            return
        wait, unit = self.quota.take_batch(self.sender(principal), rows, nbytes)
        if wait:
            self.refuse(principal, wait, unit, nbytes)

    def refuse(
        self, principal: Principal, wait: float, unit: str | None = None, nbytes: int = 0
    ) -> None:
        who = f"tenant {principal.tenant!r}" if principal.tenant else "this key"
        if unit == BYTES:
            quota = (
                f"ingest quota of {self.settings.ingest_bytes_per_minute} bytes per minute "
                f"(VIGIL_INGEST_BYTES_PER_MINUTE) reached for {who}: this batch stores "
                f"{nbytes} bytes"
            )
        else:
            quota = (
                f"ingest quota of {self.settings.ingest_rows_per_minute} rows per minute "
                f"(VIGIL_INGEST_ROWS_PER_MINUTE) reached for {who}"
            )
        raise HTTPException(
            429,
            f"{quota}; nothing was stored, retry in {retry_after_seconds(wait)} s",
            headers={"Retry-After": retry_after_seconds(wait)},
        )


def record_json(sample: SampleRecord) -> bytes:
    """The record as stored, in JSON: what the byte quota counts."""
    return sample.__pydantic_serializer__.to_json(sample, exclude_none=True)
