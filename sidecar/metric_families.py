"""The Prometheus families the sidecar exports from its database (sidecar/metrics.py reads the
rows, bounded, once per scrape): drift results of the latest run, eval means, open alerts and
incidents, the webhook outbox and the jobs' backlogs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from storage.repositories.series import ResultPoint, RunPoint
from vigil.alert_table import SEVERITIES

DELIVERY_STATUSES = ("pending", "delivered", "dead")


def _direction(test: str) -> str:
    from drift.registry import get_test

    try:
        return get_test(test).direction
    except (KeyError, ValueError):
        return "statistic"


def drift_families(
    results: Sequence[ResultPoint], latest: RunPoint | None, runs: Mapping[str, int]
) -> list[Metric]:
    """Each result of the latest finished run, its window, and the last day's runs by status."""
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
    return [statistic, p_value, threshold, detected, last_end, last_n, run_counts]


def eval_families(means: Mapping[str, tuple[float, int]]) -> list[Metric]:
    """The mean score and count of each evaluator over the last day."""
    score = GaugeMetricFamily(
        "vigil_eval_score", "Mean eval score over the last 24 h.", labels=["evaluator"]
    )
    scored = GaugeMetricFamily(
        "vigil_eval_scores_24h", "Eval scores written in the last 24 h.", labels=["evaluator"]
    )
    for name, (mean, n) in sorted(means.items()):
        score.add_metric([name], mean)
        scored.add_metric([name], float(n))
    return [score, scored]


def alert_families(
    alerts: Mapping[tuple[str, str], int], incidents: Mapping[tuple[str, bool], int]
) -> list[Metric]:
    """Open incidents (and those unacknowledged) per severity, open alerts per severity and kind."""
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
    return [open_incidents, unacknowledged, open_alerts]


def backlog_families(
    outbox: Mapping[tuple[str, str], int], embed: int, evaluate: int, behind: float
) -> list[Metric]:
    """The outbox by status, and what waits for the embed and evaluate jobs."""
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
    return [deliveries, backlog, minutes]
