"""Evaluate job: judge, relevancy and refusal scores on a share of the new samples.

Samples are visited in arrival order (`ingested_at`, `id`) from a cursor in `job_cursors`; a
sample is chosen when a hash of its id falls under `eval_share`, so a retried run chooses the
same ones. Only samples that arrived `SETTLE_S` ago are visited (a writer's transaction stamped
earlier may still be committing). When the engine is down the run stops *before* the first
sample it could not judge and leaves the cursor there: the next run retries it — nothing is lost.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Row, and_, or_, select
from sqlalchemy.orm import Session, sessionmaker

from sidecar.backlog import report_backlog
from sidecar.cursors import get_cursor, set_cursor
from sidecar.embed_device import EmbedConfig
from sidecar.embedder import Embedder, get_embedder
from sidecar.evals.judge import (
    EngineUnavailable,
    Judge,
    JudgeError,
    Judgement,
    judge_from_settings,
)
from sidecar.evals.refusal import detect_refusal
from sidecar.evals.relevancy import relevancy
from storage.models import EvalScore, Sample
from storage.repositories.backlog import oldest_unvisited
from storage.repositories.embeddings import load_embeddings
from storage.repositories.eval_scores import EvalScoreRow, store_eval_scores
from storage.types import to_utc
from vigil.config import Settings

if TYPE_CHECKING:
    from sidecar.otlp.eval_events import EvalEvents

log = logging.getLogger("vigil.sidecar.evaluate")

CURSOR = "evaluate"
SETTLE_S = 5.0
SCAN_BATCH = 500
MAX_JUDGED_PER_RUN = 200  # the judge shares the engine with live traffic


@dataclass(frozen=True)
class EvaluateResult:
    scanned: int
    chosen: int
    judged: int
    skipped: int  # chosen but unusable (no response, judge answered no digit, 4xx)
    engine_down: bool


def chosen(sample_id: str, share: float) -> bool:
    """Deterministic share selection: the first 8 bytes of sha256(id) as a fraction < share."""
    digest = hashlib.sha256(sample_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _parse_cursor(value: str | None) -> tuple[datetime, str] | None:
    if not value:
        return None
    ts, _, sample_id = value.partition("|")
    return to_utc(datetime.fromisoformat(ts)), sample_id


def _next_batch(
    session: Session, after: tuple[datetime, str] | None, until: datetime
) -> list[Row[Any]]:
    query = (
        select(Sample.id, Sample.ingested_at, Sample.prompt, Sample.response)
        .where(Sample.ingested_at.is_not(None), Sample.ingested_at < until)
        .order_by(Sample.ingested_at, Sample.id)
        .limit(SCAN_BATCH)
    )
    if after is not None:
        ts, sid = after
        query = query.where(
            or_(Sample.ingested_at > ts, and_(Sample.ingested_at == ts, Sample.id > sid))
        )
    return list(session.execute(query))


def _already_judged(session: Session, ids: list[str]) -> set[str]:
    if not ids:
        return set()
    query = select(EvalScore.sample_id).where(
        EvalScore.name == "judge", EvalScore.sample_id.in_(ids)
    )
    return set(session.scalars(query))


def run_evaluate_job(
    settings: Settings,
    session_factory: sessionmaker[Session],
    now: datetime,
    *,
    judge: Judge | None = None,
) -> EvaluateResult:
    own_judge = judge is None
    judge = judge or judge_from_settings(settings)
    scanned = n_chosen = judged = skipped = 0
    engine_down = False
    until = to_utc(now) - timedelta(seconds=SETTLE_S)
    try:
        while not engine_down and judged < MAX_JUDGED_PER_RUN:
            with session_factory() as session:  # read, then let go: no transaction is held
                after = _parse_cursor(get_cursor(session, CURSOR))  # open across judge calls
                batch = _next_batch(session, after, until)
                picks = {r.id for r in batch if chosen(r.id, settings.eval_share)}
                done = _already_judged(session, list(picks))
            if not batch:
                break
            verdicts = []  # (row, judgement): embeddings are computed for all at once
            last = None  # the last sample fully handled: the cursor moves to it
            for row in batch:
                if row.id in picks and row.id not in done:
                    if judged >= MAX_JUDGED_PER_RUN:
                        break
                    try:
                        verdict = _judge_one(judge, row)
                    except EngineUnavailable as exc:
                        log.warning("judge paused, retrying next run: %s", exc)
                        engine_down = True
                        break
                    n_chosen += 1
                    if verdict is None:
                        skipped += 1
                    else:
                        verdicts.append((row, verdict))
                        judged += 1
                scanned += 1
                last = row
            with session_factory() as session:
                rows = _score_rows(settings, session, verdicts)
                if rows:
                    store_eval_scores(session, rows, now=now)
                if last is not None:
                    set_cursor(
                        session, CURSOR, f"{to_utc(last.ingested_at).isoformat()}|{last.id}", now
                    )
                session.commit()
            if rows and settings.otlp_eval_endpoint:
                _send_events(settings.otlp_eval_endpoint, rows)
            if len(batch) < SCAN_BATCH or last is not batch[-1]:
                break
    finally:
        if own_judge:
            judge.close()
    with session_factory() as session:  # still behind after this run? (the monitor's health)
        after = _parse_cursor(get_cursor(session, CURSOR))
        report_backlog(
            session,
            settings,
            "evaluate",
            oldest_unvisited(session, after),
            settings.eval_interval_s,
            now,
        )
        session.commit()
    return EvaluateResult(scanned, n_chosen, judged, skipped, engine_down)


def _judge_one(judge: Judge, row: Row[Any]) -> Judgement | None:
    """The judge's verdict, or None when the sample cannot be judged (no text, no digit)."""
    if not row.prompt or not row.response:
        return None
    try:
        return judge.judge(row.prompt, row.response)
    except JudgeError as exc:
        log.info("sample %s not judged: %s", row.id, exc)
        return None


def _vectors(
    session: Session, embedder: Embedder, ids: list[str], texts: list[str], field: str
) -> np.ndarray:
    """The embed job's stored vectors where present; the rest computed now (not stored: the
    embed job owns storing them)."""
    found, matrix = load_embeddings(session, ids, embedder.name, field)
    have = dict(zip(found, matrix, strict=True))
    missing = [i for i, sid in enumerate(ids) if sid not in have]
    computed = embedder.encode([texts[i] for i in missing]) if missing else None
    out = np.zeros((len(ids), embedder.dim), dtype=np.float32)
    for i, sid in enumerate(ids):
        if sid in have:
            out[i] = have[sid]
    if computed is not None:
        out[missing] = computed
    return out


def _score_rows(settings: Settings, session: Session, verdicts: list[Any]) -> list[EvalScoreRow]:
    """judge, relevancy and refusal rows for the judged samples."""
    if not verdicts:
        return []
    embedder = get_embedder(EmbedConfig.from_settings(settings))
    ids = [row.id for row, _ in verdicts]
    prompts = _vectors(session, embedder, ids, [row.prompt for row, _ in verdicts], "prompt")
    responses = _vectors(session, embedder, ids, [row.response for row, _ in verdicts], "response")
    rel = relevancy(prompts, responses)
    rows = []
    for (row, verdict), cosine in zip(verdicts, rel, strict=True):
        refusal = detect_refusal(row.response)
        rows += [
            EvalScoreRow(row.id, "judge", verdict.score,
                         {"distribution": verdict.distribution, "digit_mass": verdict.digit_mass,
                          "source": verdict.source}),
            EvalScoreRow(row.id, "relevancy", float(cosine), {"model": embedder.name}),
            EvalScoreRow(row.id, "refusal", 1.0 if refusal.refused else 0.0,
                         {"phrase": refusal.phrase}),
        ]  # fmt: skip
    return rows


@functools.cache
def _events(endpoint: str) -> EvalEvents:
    from sidecar.otlp.eval_events import EvalEvents

    return EvalEvents(endpoint)


def _send_events(endpoint: str, rows: list[EvalScoreRow]) -> None:
    """Scores out as `gen_ai.evaluation.result` events (sidecar.otlp.eval_events): batched and
    sent by the SDK's thread; a failure to build them never fails the job."""
    try:
        _events(endpoint).emit(rows)
    except Exception:
        log.exception("could not export evaluation events")
