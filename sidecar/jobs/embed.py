"""Embed job: vectors for the rows the drift job will read, first and foremost.

Each drift window is read under a row cap (`storage.repositories.window_cap`), and its
embedding tests read a nested subset of those rows under a smaller cap sized to the embedder
(sidecar.embedded_rows); the rows either keeps are fixed by each sample's draw, so they are
known while the window fills. A run embeds, window by window from the oldest the drift job has
not run to the one filling now, the subset's rows that have no vector yet
(`storage.repositories.embed_queue`). Only when none of those wait
does the rest of the run's budget go to rows no window reads (oldest first), so a traffic rate
far above the embedder's never delays what drift needs. The backlog alert watches the read rows
only, and says how many minutes behind they are.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from sidecar.backlog import report_backlog
from sidecar.cursors import set_cursor
from sidecar.embed_device import EmbedConfig
from sidecar.embedded_rows import embedded_rows_cap
from sidecar.embedder import Embedder, embedder_name, get_embedder
from sidecar.jobs.windows import windows_to_read
from storage.repositories.embed_queue import WindowQueue, queue_state, queued_samples, window_queue
from storage.repositories.embeddings import (
    EmbeddingRow,
    samples_missing_embeddings,
    store_embeddings,
)
from vigil.config import Settings

BATCH = 256
BACKLOG_CURSOR = "embed_backlog"  # {waiting, oldest}: the read rows still without vectors
MAX_BATCHES_PER_RUN = 40  # ~10k samples; the rest waits for the next run instead of hogging CPU

Window = tuple[datetime, datetime]


@dataclass(frozen=True)
class EmbedResult:
    samples: int  # samples embedded this run
    vectors: int
    read_samples: int = 0  # of which rows a drift window reads
    waiting: int = 0  # read rows still without vectors after the run
    texts_per_s: float | None = None


@dataclass
class _Run:
    settings: Settings
    model: str
    embedder: Embedder | None = None
    batches: int = 0
    samples: int = 0
    vectors: int = 0
    texts: int = 0
    seconds: float = 0.0

    def embed(self, session: Session, batch: list[dict[str, Any]]) -> None:
        """Vectors for both fields of `batch`, stored and committed (a crash loses one batch)."""
        self.embedder = self.embedder or get_embedder(EmbedConfig.from_settings(self.settings))
        started = time.perf_counter()
        rows: list[EmbeddingRow] = []
        for field in ("prompt", "response"):
            todo = [s for s in batch if s[field] is not None]
            vecs = self.embedder.encode([s[field] for s in todo])
            rows += [
                EmbeddingRow(s["id"], field, self.model, v) for s, v in zip(todo, vecs, strict=True)
            ]
        self.seconds += time.perf_counter() - started
        self.texts += len(rows)
        self.vectors += store_embeddings(session, rows)
        session.commit()
        self.batches += 1
        self.samples += len(batch)

    @property
    def budget_left(self) -> bool:
        return self.batches < MAX_BATCHES_PER_RUN


def run_embed_job(
    settings: Settings,
    session_factory: sessionmaker[Session],
    now: datetime,
    *,
    windows: list[Window] | None = None,
    unread: bool | None = None,
    max_embedded_rows: int | None = None,
) -> EmbedResult:
    """Embed the read rows of `windows` (default: every window the drift job has yet to run,
    and the one filling now), then, budget left and nothing read waiting, unread rows
    (`unread`, default Settings.embed_unread_when_idle). A window's read rows are those whose
    vectors its embedding tests read: at most `max_embedded_rows` (default
    `embedded_rows_cap(settings)`), a nested stratified subset of the capped window."""
    run = _Run(settings, model_name(settings))
    embedded_cap = max_embedded_rows or embedded_rows_cap(settings)
    with session_factory() as session:
        windows = (
            windows
            if windows is not None
            else windows_to_read(session, now, settings.drift_interval_s)
        )
        queues = [window_queue(session, start, end, max_rows=settings.drift_max_window_rows,
                               max_embedded_rows=embedded_cap,
                               min_per_segment=settings.drift_min_rows_per_segment)
                  for start, end in windows]  # fmt: skip
        for queue in queues:
            _drain(run, session, queue)
        read_samples = run.samples
        waiting, oldest = 0, None
        for queue in queues:
            n, first = queue_state(session, queue, run.model)
            waiting += n
            oldest = first if oldest is None or (first is not None and first < oldest) else oldest
        if waiting == 0 and (settings.embed_unread_when_idle if unread is None else unread):
            while run.budget_left:
                batch = samples_missing_embeddings(session, run.model, limit=BATCH)
                if not batch:
                    break
                run.embed(session, batch)
        set_cursor(
            session,
            BACKLOG_CURSOR,
            json.dumps(  # what /metrics reports between runs
                {"waiting": waiting, "oldest": None if oldest is None else oldest.isoformat()}
            ),
            now,
        )
        per_s = run.samples / run.seconds if run.seconds > 0 else None
        report_backlog(
            session,
            settings,
            "embed",
            oldest,
            settings.embed_interval_s,
            now,
            waiting=waiting,
            rate=per_s,
        )
        session.commit()
    return EmbedResult(
        run.samples,
        run.vectors,
        read_samples,
        waiting,
        run.texts / run.seconds if run.seconds > 0 else None,
    )


def _drain(run: _Run, session: Session, queue: WindowQueue) -> None:
    after = None  # keyset: each batch starts past the last one
    while run.budget_left:
        batch = queued_samples(session, queue, run.model, limit=BATCH, after=after)
        if not batch:
            return
        run.embed(session, batch)
        if len(batch) < BATCH:
            return
        after = batch[-1]["key"]


def model_name(settings: Settings) -> str:
    """The stored model name without loading the model (an idle run stays cheap)."""
    return embedder_name(settings.embedding_model_path)
