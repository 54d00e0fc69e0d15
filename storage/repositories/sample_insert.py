"""Samples in: the bulk idempotent insert, keyed by (tenant, record id)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from storage.models import Embedding, EvalScore, Sample
from storage.records import ParsedSample, sample_from_record, vector_to_bytes
from storage.repositories._sql import chunked, insert_ignore
from storage.repositories.client_embeddings import check_client_dimensions
from storage.types import utcnow


def scoped_id(tenant: str | None, record_id: str) -> str:
    """The stored id of a record whose own id another tenant's row holds: `~` and a digest of
    (tenant, record id). No record id contains `~`, so a scoped id never meets one."""
    digest = hashlib.sha256(f"{tenant or ''}\x00{record_id}".encode()).hexdigest()
    return "~" + digest[:63]


def insert_samples(
    session: Session,
    records: Iterable[dict[str, Any] | ParsedSample],
    *,
    source: str = "engine",
    now: datetime | None = None,
) -> int:
    """Insert records (dicts in the sample record shape, or already parsed) with their eval scores
    and embeddings; idempotent on (tenant, id): a record already stored for its tenant is left
    untouched, child rows included (a repeated key in one call keeps the first); the same id
    under another tenant is another sample. Returns how many samples were new (exact unless
    another session inserts the same key concurrently). Raises RecordError on a bad dict or a
    vector whose dimension differs from its `client:` model's (nothing is inserted then). Does
    not commit."""
    parsed: dict[tuple[str | None, str], ParsedSample] = {}
    for record in records:
        item = (
            record
            if isinstance(record, ParsedSample)
            else sample_from_record(record, source=source)
        )
        # a retried item keeps its record id, and starts again from it
        item.row["id"] = item.row.setdefault("record_id", item.row["id"])
        parsed.setdefault((item.row["tenant"], item.row["record_id"]), item)
    if not parsed:
        return 0
    check_client_dimensions(session, parsed.values())
    ingested_at = now or utcnow()
    stored, taken = _stored_and_taken(session, list({rid for _, rid in parsed}))
    new = [item for key, item in parsed.items() if key not in stored]
    for item in new:  # the record's own id unless another tenant's row (or this batch) holds it
        if item.row["id"] in taken:
            item.row["id"] = scoped_id(item.row["tenant"], item.row["record_id"])
        taken.add(item.row["id"])
    _insert_rows(session, new, ingested_at)
    lost = _lost_races(session, new)
    if lost:  # another session took a record id for another tenant meanwhile
        for item in lost:
            item.row["id"] = scoped_id(item.row["tenant"], item.row["record_id"])
        _insert_rows(session, lost, ingested_at)
        lost = _lost_races(session, lost)
    skipped = {id(item) for item in lost}  # true duplicates, stored meanwhile by another session
    inserted = [item for item in new if id(item) not in skipped]
    _insert_children(session, inserted, ingested_at)
    return len(inserted)


def _stored_and_taken(
    session: Session, record_ids: list[str]
) -> tuple[set[tuple[str | None, str]], set[str]]:
    """Which (tenant, record id) keys are stored, and which stored ids are taken, for these
    record ids: one indexed SELECT per chunk. (INSERT ... RETURNING would say it too, but
    psycopg re-parses the huge multi-row statement client-side: 4x slower on PG.)"""
    stored: set[tuple[str | None, str]] = set()
    taken: set[str] = set()
    for chunk in chunked(record_ids):
        query = select(Sample.id, Sample.tenant, Sample.record_id).where(
            or_(Sample.record_id.in_(chunk), Sample.id.in_(chunk))
        )
        for sid, tenant, rid in session.execute(query):
            stored.add((tenant, rid))
            taken.add(sid)
    return stored, taken


def _insert_rows(session: Session, items: list[ParsedSample], ingested_at: datetime) -> None:
    # ON CONFLICT DO NOTHING, on the stored id and on (record_id, tenant) alike: a concurrent
    # insert of the same key is not an error
    insert_ignore(
        session, Sample.__table__, [{**item.row, "ingested_at": ingested_at} for item in items], []
    )


def _lost_races(session: Session, items: list[ParsedSample]) -> list[ParsedSample]:
    """Items whose stored id now holds another key's row (their insert was skipped)."""
    holder: dict[str, tuple[str | None, str]] = {}
    for chunk in chunked([item.row["id"] for item in items]):
        query = select(Sample.id, Sample.tenant, Sample.record_id).where(Sample.id.in_(chunk))
        holder.update({sid: (tenant, rid) for sid, tenant, rid in session.execute(query)})
    return [
        item
        for item in items
        if holder.get(item.row["id"]) != (item.row["tenant"], item.row["record_id"])
    ]


def _insert_children(session: Session, items: list[ParsedSample], ingested_at: datetime) -> None:
    score_rows = [
        {
            "sample_id": item.id,
            "name": name,
            "score": score,
            "created_at": ingested_at,
            "detail": None,
        }
        for item in items
        for name, score in item.eval_scores.items()
    ]
    insert_ignore(session, EvalScore.__table__, score_rows, ["sample_id", "name"])
    emb_rows = []
    for item in items:
        for field, vec in item.embeddings.items():
            data, dim = vector_to_bytes(vec)
            emb_rows.append(
                {"sample_id": item.id, "field": field, "model": item.embedding_model,
                 "dim": dim, "vector": data}
            )  # fmt: skip
    insert_ignore(session, Embedding.__table__, emb_rows, ["sample_id", "field", "model"])
