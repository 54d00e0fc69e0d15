"""`/`: the open incidents first (the most severe one's headline is the page's first sentence;
each with its severity, since when, its alerts and who is on it), then open incidents and alerts
by severity, the active baseline, and as evidence the latest run's drifted results (no
JavaScript needed), and the chart sections that load their series from `/api/v1/series`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboards.alert_lead import ratio
from dashboards.charts import direction_of
from dashboards.incident_list import list_incidents
from dashboards.moved import rank_moved
from dashboards.segment_page import segment_href
from storage.models import Alert, DriftResult, DriftRun
from storage.repositories.baselines import get_active_baseline
from storage.repositories.series import latest_done_run
from storage.types import to_utc

SEVERITIES = ("critical", "high", "moderate", "review")
MAX_ROWS = 25


def moved_rows(
    session: Session, run_id: int, window_samples: int | None, sizes: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], int]:
    """(the run's drifted results leading first — a slice under the floor never ahead of a
    larger one (dashboards/moved.py) — at most MAX_ROWS of them, how many drifted in all)."""
    results = session.scalars(
        select(DriftResult)
        .where(DriftResult.run_id == run_id, DriftResult.drifted.is_(True))
        .order_by(DriftResult.id)
    ).all()
    ranked = rank_moved(results, window_samples, sizes)
    rows = []
    for m in ranked[:MAX_ROWS]:
        r = m.row
        rows.append(
            {
                "test": r.test,
                "feature": r.feature,
                "segment": r.segment,
                "href": segment_href(r.segment),
                "statistic": r.statistic,
                "p_value": r.p_value,
                "threshold": r.threshold,
                "direction": direction_of(r.test),
                "ratio": ratio(r) or None,
                "samples": m.samples,
                "share": m.share if window_samples else None,
                "small": not m.above_floor,
            }
        )
    return rows, len(ranked)


def overview_context(session: Session, range_: str, now: datetime) -> dict[str, Any]:
    active = get_active_baseline(session)
    latest = latest_done_run(session)
    open_alerts = list(
        session.scalars(
            select(Alert).where(Alert.status == "open").order_by(Alert.last_seen.desc()).limit(200)
        )
    )
    by_severity = {s: 0 for s in SEVERITIES}
    for a in open_alerts:
        by_severity[a.severity] = by_severity.get(a.severity, 0) + 1
    incidents = list_incidents(session, now)
    incidents_by_severity = {s: 0 for s in SEVERITIES}
    for i in incidents:
        incidents_by_severity[i["severity"]] = incidents_by_severity.get(i["severity"], 0) + 1
    baseline = None
    if active is not None:
        baseline = {
            "id": active.id,
            "name": active.name,
            "num_samples": active.num_samples,
            "window": f"{to_utc(active.window_start):%Y-%m-%d %H:%M} → "
            f"{to_utc(active.window_end):%Y-%m-%d %H:%M}",
            "age_s": (now - to_utc(active.activated_at or active.created_at)).total_seconds(),
        }
    run = None
    if latest is not None:
        run = {
            "id": latest.run_id,
            "num_samples": latest.num_samples,
            "window": f"{latest.window_start:%Y-%m-%d %H:%M} → {latest.window_end:%H:%M} UTC",
            "age_s": (now - latest.window_end).total_seconds(),
        }
        stored = session.get(DriftRun, latest.run_id)
        sizes = (stored.summary or {}).get("segments") if stored is not None else None
        run["moved"], run["moved_count"] = moved_rows(
            session, latest.run_id, latest.num_samples, sizes if isinstance(sizes, dict) else None
        )
    return {
        "baseline": baseline,
        "run": run,
        "by_severity": by_severity,
        "incidents": incidents[:MAX_ROWS],
        "incidents_by_severity": incidents_by_severity,
        "open_alerts": open_alerts[:MAX_ROWS],
        "range": range_,
    }
