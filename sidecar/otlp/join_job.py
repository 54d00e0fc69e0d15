"""The otlp_join job (every `VIGIL_OTLP_JOIN_INTERVAL_S`): spans that waited their
`VIGIL_OTLP_JOIN_WAIT_S` in the join buffer become samples with whatever text their log records
gave (none, if none came); log records whose span never came are dropped and counted."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from sidecar.ingest.write_path import IngestPath
from sidecar.otlp.join_buffer import expire
from sidecar.otlp.records import store_joined
from sidecar.otlp.tally import JOB_TALLY
from vigil.config import Settings

log = logging.getLogger("vigil.sidecar.otlp")
BATCH = 1000


def run_join_job(
    settings: Settings, session_factory: sessionmaker[Session], now: datetime
) -> dict[str, int]:
    ingest = IngestPath.from_settings(settings, session_factory)
    stored = dropped = 0
    while True:
        with session_factory() as session:
            spans, logs = expire(session, now, BATCH)
            session.commit()
        if spans:
            store_joined(ingest, spans)
        stored, dropped = stored + len(spans), dropped + logs
        if len(spans) + logs < BATCH:
            break
    if dropped:
        JOB_TALLY.count("logs", {"expired_without_span": dropped})
        log.info("otlp_join: %d log records expired without their span", dropped)
    return {"spans": stored, "logs_expired": dropped}
