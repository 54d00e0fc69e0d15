"""The sidecar's Prometheus export: drift, eval, alert, outbox and job signals, read from the
database when Prometheus scrapes (a custom collector; every query bounded), plus the in-process
job tallies. Served at `/metrics` behind the same viewer auth as the pages: Prometheus sends
a key as `authorization: {credentials: <key>}` in its scrape config.

Other sidecar parts may register more collectors on `app.state.metrics_registry`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from sidecar import job_stats
from sidecar.cursors import get_cursor
from sidecar.metric_families import alert_families, backlog_families, drift_families, eval_families
from storage.repositories.series import (
    arrived_after,
    delivery_counts,
    drift_run_counts,
    embed_backlog,
    eval_means,
    latest_done_run,
    open_alert_counts,
    open_incident_counts,
    results_for_runs,
)
from vigil.config import Settings

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_EXPORTED_RESULTS = 5000  # label sets per scrape: tests x features x segments of one run
log = logging.getLogger("vigil.sidecar.metrics")


def _minutes_behind(value: str | None, now: datetime) -> float:
    """Minutes since the oldest read row still without vectors arrived (0: none waiting)."""
    oldest = json.loads(value).get("oldest") if value else None
    return (
        0.0
        if oldest is None
        else max((now - datetime.fromisoformat(oldest)).total_seconds() / 60, 0.0)
    )


def _eval_cursor_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.split("|", 1)[0])
    except ValueError:
        return None


class SidecarCollector(Collector):
    def __init__(self, settings: Settings, session_factory: sessionmaker[Session]) -> None:
        self.settings = settings
        self.session_factory = session_factory

    def describe(self) -> Iterable[Metric]:
        return []  # label sets are dynamic

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily("vigil_database_up", "1 when the sidecar could read its database.")
        try:
            families = self._from_database()
        except Exception as exc:  # a scrape must not fail: report the outage as a value
            log.warning("metrics: database read failed: %s: %s", exc.__class__.__name__, exc)
            up.add_metric([], 0.0)
            families = []
        else:
            up.add_metric([], 1.0)
        yield up
        yield from families
        yield from _job_families()

    def _from_database(self) -> list[Metric]:
        from sidecar.jobs.embed import model_name

        now = datetime.now(UTC)
        with self.session_factory() as session:
            latest = latest_done_run(session)
            results = (
                results_for_runs(session, [latest.run_id], limit=MAX_EXPORTED_RESULTS)
                if latest
                else []
            )
            alerts = open_alert_counts(session)
            incidents = open_incident_counts(session)
            outbox = delivery_counts(session)
            runs = drift_run_counts(session, now - timedelta(hours=24))
            means = eval_means(session, now - timedelta(hours=24))
            embed = embed_backlog(session, model_name(self.settings))
            evaluate = arrived_after(session, _eval_cursor_time(get_cursor(session, "evaluate")))
            behind = _minutes_behind(get_cursor(session, "embed_backlog"), now)
        return [
            *drift_families(results, latest, runs),
            *eval_families(means),
            *alert_families(alerts, incidents),
            *backlog_families(outbox, embed, evaluate, behind),
        ]


def _job_families() -> list[Metric]:
    runs = CounterMetricFamily(
        "vigil_job_runs", "Scheduled job runs on this replica.", labels=["job"]
    )
    failures = CounterMetricFamily(
        "vigil_job_failures", "Scheduled job runs that raised.", labels=["job"]
    )
    duration = SummaryMetricFamily(
        "vigil_job_duration_seconds", "Scheduled job run time.", labels=["job"]
    )
    last_ok = GaugeMetricFamily(
        "vigil_job_last_success_timestamp_seconds",
        "When the job last finished without error (unix seconds).",
        labels=["job"],
    )
    for name, tally in sorted(job_stats.snapshot().items()):
        runs.add_metric([name], tally.runs)
        failures.add_metric([name], tally.failures)
        duration.add_metric([name], count_value=tally.runs, sum_value=tally.seconds_total)
        if tally.last_success_unix:
            last_ok.add_metric([name], tally.last_success_unix)
    return [runs, failures, duration, last_ok]


def build_registry(settings: Settings, session_factory: sessionmaker[Session]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(SidecarCollector(settings, session_factory))
    return registry


def metrics_router(registry: CollectorRegistry) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/metrics")
    def metrics(request: Request) -> Response:
        started = time.perf_counter()
        body = generate_latest(registry)
        log.debug("metrics scrape took %.3fs", time.perf_counter() - started)
        return Response(body, media_type=CONTENT_TYPE)

    return router
