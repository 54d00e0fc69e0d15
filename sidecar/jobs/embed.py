"""Embed job: prompts and responses of samples that have no embedding yet, in batches."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from sidecar.backlog import report_backlog
from sidecar.embedder import embedder_name, get_embedder
from storage.repositories.backlog import oldest_unembedded
from storage.repositories.embeddings import (
    EmbeddingRow,
    samples_missing_embeddings,
    store_embeddings,
)
from vigil.config import Settings

BATCH = 256
MAX_BATCHES_PER_RUN = 40  # ~10k samples; the rest waits for the next run instead of hogging CPU


@dataclass(frozen=True)
class EmbedResult:
    samples: int
    vectors: int


def run_embed_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> EmbedResult:
    samples = vectors = 0
    embedder = None
    for _ in range(MAX_BATCHES_PER_RUN):
        with session_factory() as session:
            model = embedder.name if embedder else model_name(settings)
            batch = samples_missing_embeddings(session, model, limit=BATCH)
            if not batch:
                break
            embedder = embedder or get_embedder(settings.embedding_model_path)
            rows: list[EmbeddingRow] = []
            for field in ("prompt", "response"):
                todo = [s for s in batch if s[field] is not None]
                vecs = embedder.encode([s[field] for s in todo])
                rows += [EmbeddingRow(s["id"], field, embedder.name, v) for s, v in zip(todo, vecs, strict=True)]
            vectors += store_embeddings(session, rows)
            session.commit()  # one transaction per batch: a crash loses at most one batch's work
            samples += len(batch)
        if len(batch) < BATCH:
            break
    with session_factory() as session:  # still behind after this run? (the monitor's health)
        report_backlog(session, settings, "embed", oldest_unembedded(session, model_name(settings)),
                       settings.embed_interval_s, now)
        session.commit()
    return EmbedResult(samples=samples, vectors=vectors)


def model_name(settings: Settings) -> str:
    """The stored model name without loading the model (an idle run stays cheap)."""
    return embedder_name(settings.embedding_model_path)
