"""Mapped spans -> sample records the caller may write, and the write of spans the join buffer
completed: the same record schema, rules and storage as `POST /v1/ingest` (sidecar.ingest).

Each refusal is counted twice: by its reason key (sidecar.otlp.tally.REASONS) for the
Prometheus counter, and by its message for OTLP's partial_success."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from starlette.exceptions import HTTPException

from sidecar.ingest.write_path import IngestPath
from sidecar.otlp.join_buffer import Held
from sidecar.otlp.spans import scrub
from storage.types import utcnow
from vigil.keys import Principal
from vigil.sample_record import RecordError, SampleRecord, validate_record

log = logging.getLogger("vigil.sidecar.otlp")


@dataclass
class Refusals:
    messages: Counter[str] = field(default_factory=Counter)  # for partial_success
    reasons: Counter[str] = field(default_factory=Counter)  # for the tally

    def add(self, reason: str, message: str, n: int = 1) -> None:
        self.reasons[reason] += n
        self.messages[message[:200]] += n

    def __len__(self) -> int:
        return sum(self.reasons.values())


def validated(
    mapped: dict[str, Any], now: datetime, max_future_skew_s: float, refusals: Refusals
) -> SampleRecord | None:
    try:
        return validate_record(mapped, now=now, max_future_skew_s=max_future_skew_s)
    except RecordError as exc:
        message = str(exc)
        future = message.startswith("timestamp:") and "future" in message
        refusals.add("future_timestamp" if future else "invalid_record", message)
        return None


def allowed(
    records: list[SampleRecord], principal: Principal, ingest: IngestPath, refusals: Refusals
) -> list[int]:
    """Indexes of the records the caller's per-sample rules let through (checked on copies:
    store() applies them for real), the others counted. The batch is checked at once; only
    when one is refused are the records checked one by one."""
    now = utcnow()
    try:
        ingest.policy.apply([r.model_copy() for r in records], principal, now)
        return list(range(len(records)))
    except HTTPException as exc:
        if exc.status_code != 422:
            raise  # a rule about the caller, not a span (the tenant): the whole batch
    kept = []
    for index, record in enumerate(records):
        try:
            ingest.policy.apply([record.model_copy()], principal, now)
        except HTTPException as exc:
            if exc.status_code != 422:
                raise
            refusals.add("refused_by_policy", str(exc.detail).removeprefix("samples[0]."))
            continue
        kept.append(index)
    return kept


def store_joined(ingest: IngestPath, held: list[Held]) -> int:
    """Store spans the join buffer let go (complete, expired or past its size), their rows
    already counted against the quota when the spans came. Returns how many were refused."""
    settings = ingest.settings
    groups: dict[tuple[Any, ...], tuple[Principal, list[SampleRecord]]] = {}
    refusals = Refusals()
    now = utcnow()
    for item in held:
        record = dict(item.record)
        for name in ("prompt", "response"):
            if record.get(name) is not None:
                record[name] = scrub(record[name])
        valid = validated(record, now, settings.max_future_skew_s, refusals)
        if valid is not None:
            key = tuple(sorted(asdict(item.principal).items()))
            groups.setdefault(key, (item.principal, []))[1].append(valid)
    for principal, records in groups.values():
        kept = [records[i] for i in allowed(records, principal, ingest, refusals)]
        for i in range(0, len(kept), settings.ingest_max_samples):
            try:
                ingest.store(kept[i : i + settings.ingest_max_samples], principal, metered=False)
            except HTTPException as exc:
                refusals.add("invalid_record", str(exc.detail), len(kept[i : i + 1000]))
    if refusals:
        log.warning("otlp: %d joined spans not stored: %s", len(refusals), dict(refusals.messages))
    return len(refusals)
