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
from vigil.alert_table import SEVERITIES
from vigil.config import Settings

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DELIVERY_STATUSES = ("pending", "delivered", "dead")
MAX_EXPORTED_RESULTS = 5000  # label sets per scrape: tests x features x segments of one run
log = logging.getLogger("vigil.sidecar.metrics")


def _direction(test: str) -> str:
    from drift.registry import get_test

    try:
        return get_test(test).direction
    except (KeyError, ValueError):
        return "statistic"


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
        labels = ["test", "feature", "segment"]
        statistic = GaugeMetricFamily(
            "vigil_drift_statistic", "Drift test statistic in the latest run.", labels=labels
        )
        p_value = GaugeMetricFamily(
            "vigil_drift_p_value", "Drift test p-value in the latest run.", labels=labels
        )
        threshold = GaugeMetricFamily(
            "vigil_drift_threshold",
            "Calibrated threshold; direction=statistic: drift above it, "
            "direction=p_value: drift at or below it.",
            labels=labels + ["direction"],
        )
        detected = GaugeMetricFamily(
            "vigil_drift_detected", "1 when the latest run found drift.", labels=labels
        )
        for r in results:
            key = [r.test, r.feature, r.segment]
            if r.statistic is not None:
                statistic.add_metric(key, float(r.statistic))
            if r.p_value is not None:
                p_value.add_metric(key, float(r.p_value))
            if r.threshold is not None:
                threshold.add_metric(key + [_direction(r.test)], float(r.threshold))
            detected.add_metric(key, 1.0 if r.drifted else 0.0)
        last_end = GaugeMetricFamily(
            "vigil_drift_last_window_end_timestamp_seconds",
            "End of the latest finished drift window (unix seconds).",
        )
        last_n = GaugeMetricFamily(
            "vigil_drift_last_window_samples", "Samples in the latest finished window."
        )
        if latest is not None:
            last_end.add_metric([], latest.window_end.timestamp())
            last_n.add_metric([], float(latest.num_samples))
        run_counts = GaugeMetricFamily(
            "vigil_drift_runs_24h",
            "Drift runs started in the last 24 h, by status.",
            labels=["status"],
        )
        for status in ("running", "done", "failed"):
            run_counts.add_metric([status], float(runs.get(status, 0)))
        score = GaugeMetricFamily(
            "vigil_eval_score", "Mean eval score over the last 24 h.", labels=["evaluator"]
        )
        scored = GaugeMetricFamily(
            "vigil_eval_scores_24h", "Eval scores written in the last 24 h.", labels=["evaluator"]
        )
        for name, (mean, n) in sorted(means.items()):
            score.add_metric([name], mean)
            scored.add_metric([name], float(n))
        open_alerts = GaugeMetricFamily(
            "vigil_alerts_open", "Open alerts.", labels=["severity", "kind"]
        )
        for (severity, kind), n in sorted(alerts.items()):
            open_alerts.add_metric([severity, kind], float(n))
        open_incidents = GaugeMetricFamily(
            "vigil_incidents_open", "Open incidents (one event each).", labels=["severity"]
        )
        unacknowledged = GaugeMetricFamily(
            "vigil_incidents_unacknowledged",
            "Open incidents nobody has acknowledged.",
            labels=["severity"],
        )
        for severity in SEVERITIES:  # zeros too: rules compare, not test presence
            counts = {ack: incidents.get((severity, ack), 0) for ack in (True, False)}
            open_incidents.add_metric([severity], float(sum(counts.values())))
            unacknowledged.add_metric([severity], float(counts[False]))
        deliveries = GaugeMetricFamily(
            "vigil_deliveries",
            "Webhook outbox rows by status (pending, delivered, dead).",
            labels=["status"],
        )
        by_status = {status: 0 for status in DELIVERY_STATUSES}
        for (status, _fmt), n in outbox.items():
            by_status[status] = by_status.get(status, 0) + n
        for status, n in sorted(by_status.items()):  # zeros too: rules compare, not test presence
            deliveries.add_metric([status], float(n))
        backlog = GaugeMetricFamily(
            "vigil_backlog_samples", "Samples waiting for a job (capped).", labels=["job"]
        )
        backlog.add_metric(["embed"], float(embed))
        backlog.add_metric(["evaluate"], float(evaluate))
        minutes = GaugeMetricFamily(
            "vigil_backlog_minutes",
            "How long the oldest row a drift window "
            "reads has waited for its vectors, at the embed job's last run.",
            labels=["job"],
        )
        minutes.add_metric(["embed"], behind)
        return [
            statistic,
            p_value,
            threshold,
            detected,
            last_end,
            last_n,
            run_counts,
            score,
            scored,
            open_incidents,
            unacknowledged,
            open_alerts,
            deliveries,
            backlog,
            minutes,
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
