"""The ingest API's write path through storage: validate each record, insert idempotently."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from sidecar.ingest.schema import IngestResult
from storage.records import RecordError, sample_from_record
from storage.repositories.samples import insert_samples
from storage.types import utcnow
from vigil.sample_record import SampleRecord


def ingest_records(
    session: Session,
    records: list[SampleRecord],
    *,
    now: datetime | None = None,
    max_future_skew_s: float | None = None,
) -> IngestResult:
    """Insert records from `POST /v1/ingest`; a record storage refuses -> 422 naming its index.
    Does not commit."""
    now = now or utcnow()
    skew = {} if max_future_skew_s is None else {"max_future_skew_s": max_future_skew_s}
    parsed = []
    for index, record in enumerate(records):
        try:
            parsed.append(sample_from_record(record, source="ingest", now=now, **skew))
        except RecordError as exc:
            raise HTTPException(422, f"samples[{index}]: {exc}") from None
    try:
        inserted = insert_samples(session, parsed, source="ingest", now=now)
    except RecordError as exc:  # a rule that needs the stored rows (a client model's dimension)
        raise HTTPException(422, str(exc)) from None
    return IngestResult(
        received=len(records), inserted=inserted, duplicates=len(records) - inserted
    )
