"""The OTLP join buffer: a GenAI span and the log records carrying its content meet in the
database (`otlp_pending`), whichever comes first, in whichever request, at whichever replica.

- A span without text (its instrumentation sends content as log records) waits as a `span` row
  holding its mapped record and the caller it came from. Log records already waiting for it
  are read at once; with an answer among them the sample is complete and stored.
- Log records wait as `log` rows holding their content pieces (sidecar.otlp.log_content); when
  their span is waiting and the pieces hold an answer, the sample is complete.
- Every row expires after `VIGIL_OTLP_JOIN_WAIT_S`; the otlp_join job (sidecar.otlp.join_job)
  stores each expired span with what text it has (none, if no log came) and drops expired logs.
- One sender holds at most `VIGIL_OTLP_JOIN_MAX_ROWS` rows: past that a span is stored at once
  without text and log records are refused, so nothing grows without bound.

Rows are keyed by (sender, trace id, span id): a sender's logs never complete another's spans.
Two replicas completing the same span store it once (sample ids are idempotent).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from sidecar.otlp.log_content import joined
from storage.models import OtlpPending
from vigil.keys import Principal

Key = tuple[str, str]  # (trace id hex, span id hex)
MAX_PIECES_PER_SPAN = 64  # log rows one span may gather
CHUNK = 500  # values per IN clause


@dataclass
class Held:
    """A span waiting for (or completed by) its content: its record and who sent it."""

    key: Key
    record: dict[str, Any]
    principal: Principal


def merge(record: dict[str, Any], pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """The record with the text of its pieces (texts cut and redacted by the caller's scrub)."""
    prompt, response, finish = joined(pieces)
    out = dict(record)
    if prompt is not None and "prompt" not in out:
        out["prompt"] = prompt
    if response is not None and "response" not in out:
        out["response"] = response
    if finish and "finish_reason" not in out:
        out["finish_reason"] = finish
    return out


def complete(pieces: list[dict[str, Any]]) -> bool:
    return any(p["part"] == "response" for p in pieces)


def _rows(session: Session, sender: str, keys: Iterable[Key], kind: str) -> list[OtlpPending]:
    """The sender's rows of `kind` for `keys`: looked up by span id (the index's last column;
    one bound value per key), the trace id checked here."""
    wanted = set(keys)
    span_ids = sorted({span_id for _, span_id in wanted})
    found: list[OtlpPending] = []
    for i in range(0, len(span_ids), CHUNK):
        found += session.scalars(
            select(OtlpPending).where(
                OtlpPending.sender == sender,
                OtlpPending.kind == kind,
                OtlpPending.span_id.in_(span_ids[i : i + CHUNK]),
            )
        )
    return [row for row in found if (row.trace_id, row.span_id) in wanted]


def waiting(session: Session, sender: str) -> int:
    return (
        session.scalar(
            select(func.count()).select_from(OtlpPending).where(OtlpPending.sender == sender)
        )
        or 0
    )


def _by_key(rows: list[OtlpPending]) -> dict[Key, list[OtlpPending]]:
    grouped: dict[Key, list[OtlpPending]] = defaultdict(list)
    for row in rows:
        grouped[(row.trace_id, row.span_id)].append(row)
    return grouped


def _delete(session: Session, rows: Iterable[OtlpPending]) -> None:
    ids = [row.id for row in rows]
    for i in range(0, len(ids), CHUNK):
        session.execute(delete(OtlpPending).where(OtlpPending.id.in_(ids[i : i + CHUNK])))


def _pieces(rows: list[OtlpPending]) -> list[dict[str, Any]]:
    return [piece for row in rows for piece in json.loads(row.body)]


def hold_spans(
    session: Session, sender: str, spans: list[Held], now: datetime, wait_s: float, max_rows: int
) -> tuple[list[Held], list[Held]]:
    """Join `spans` with their waiting logs. Returns (completed, stored without waiting: the
    buffer is full); the others now wait. Does not commit."""
    logs = _by_key(_rows(session, sender, (s.key for s in spans), "log"))
    done, full, gone = [], [], []
    room = max_rows - waiting(session, sender)
    for span in spans:
        pieces = _pieces(logs.get(span.key, []))
        if complete(pieces):
            gone += logs.pop(span.key)
            done.append(Held(span.key, merge(span.record, pieces), span.principal))
        elif room <= 0:
            full.append(span)
        else:
            room -= 1
            session.add(_row(sender, span.key, "span", _span_body(span), now, wait_s))
    _delete(session, gone)
    return done, full


def hold_logs(
    session: Session,
    sender: str,
    pieces: dict[Key, list[dict[str, Any]]],
    now: datetime,
    wait_s: float,
    max_rows: int,
) -> tuple[list[Held], set[Key]]:
    """Add log pieces; returns (spans now complete, keys refused: the buffer is full). Does
    not commit."""
    spans = _by_key(_rows(session, sender, pieces, "span"))
    earlier = _by_key(_rows(session, sender, spans, "log"))
    done, refused, gone = [], set(), []
    room = max_rows - waiting(session, sender)
    for key, new in pieces.items():
        if key in spans:
            gathered = _pieces(earlier.get(key, [])) + new
            if complete(gathered):
                span = spans[key][0]
                gone += spans[key] + earlier.get(key, [])
                held = _held(span)
                done.append(Held(key, merge(held.record, gathered), held.principal))
                continue
        if room <= 0 or len(earlier.get(key, [])) >= MAX_PIECES_PER_SPAN:
            refused.add(key)
            continue
        room -= 1
        session.add(_row(sender, key, "log", new, now, wait_s))
    _delete(session, gone)
    return done, refused


def expire(session: Session, now: datetime, limit: int = 1000) -> tuple[list[Held], int]:
    """Take expired rows out: the spans (with what text their logs gave), and how many log
    records went without their span. Does not commit."""
    expired = list(
        session.scalars(
            select(OtlpPending)
            .where(OtlpPending.expires_at <= now)
            .order_by(OtlpPending.id)
            .limit(limit)
        )
    )
    spans = [row for row in expired if row.kind == "span"]
    out: list[Held] = []
    used: list[OtlpPending] = []  # log rows joined to an expired span
    for sender, rows in _by_sender(spans).items():
        logs = _by_key(_rows(session, sender, ((r.trace_id, r.span_id) for r in rows), "log"))
        for row in rows:
            key = (row.trace_id, row.span_id)
            held = _held(row)
            pieces = _pieces(logs.get(key, []))
            used += logs.pop(key, [])
            out.append(Held(key, merge(held.record, pieces), held.principal))
    joined_ids = {row.id for row in used}
    _delete(session, expired + [row for row in used if row not in expired])
    return out, sum(1 for row in expired if row.kind == "log" and row.id not in joined_ids)


def _by_sender(rows: list[OtlpPending]) -> dict[str, list[OtlpPending]]:
    grouped: dict[str, list[OtlpPending]] = defaultdict(list)
    for row in rows:
        grouped[row.sender].append(row)
    return grouped


def _span_body(span: Held) -> list[dict[str, Any]]:
    return [{"record": span.record, "principal": asdict(span.principal)}]


def _held(row: OtlpPending) -> Held:
    body = json.loads(row.body)[0]
    return Held((row.trace_id, row.span_id), body["record"], Principal(**body["principal"]))


def _row(sender: str, key: Key, kind: str, body: Any, now: datetime, wait_s: float) -> OtlpPending:
    return OtlpPending(
        sender=sender,
        trace_id=key[0],
        span_id=key[1],
        kind=kind,
        body=json.dumps(body),
        expires_at=now + timedelta(seconds=wait_s),
    )
