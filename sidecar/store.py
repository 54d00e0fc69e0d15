"""The ingest API's write path through storage: validate each record, insert idempotently."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from sidecar.ingest_schema import IngestResult
from storage.records import RecordError, sample_from_record
from storage.repositories.samples import insert_samples
from storage.types import utcnow


def ingest_records(session: Session, records: list[dict[str, Any]]) -> IngestResult:
    """Insert records from `POST /v1/ingest`; a record storage refuses -> 422 naming its index.
    Does not commit."""
    now = utcnow()
    parsed = []
    for index, record in enumerate(records):
        try:
            parsed.append(sample_from_record(record, source="ingest", now=now))
        except RecordError as exc:
            raise HTTPException(422, f"samples[{index}]: {exc}") from None
    inserted = insert_samples(session, parsed, source="ingest", now=now)
    return IngestResult(received=len(records), inserted=inserted, duplicates=len(records) - inserted)
