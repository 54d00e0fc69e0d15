"""`/alerts/{id}`: one sentence of what moved and how far past its threshold, that signal over
the last days (chart), example prompts from the moved region for embedding alerts, the action
timeline and the on-call actions; evidence JSON behind a toggle."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
from fastapi import HTTPException
from sqlalchemy import select
from sqlalchemy.orm import Session

from alerts.lifecycle import actions
from dashboards.charts import direction_of, drift_score, score_threshold
from storage.models import Alert, Delivery, DriftResult, DriftRun, Embedding
from storage.repositories.samples import fetch_window
from storage.repositories.series import ResultPoint
from storage.types import to_utc

MAX_EXAMPLES = 8
EMBEDDING_TESTS = ("mmd", "new_cluster", "cluster_growth")


def _ratio(r: DriftResult) -> float:
    direction = direction_of(r.test)
    point = ResultPoint(r.run_id, r.test, r.feature, r.segment, r.statistic, r.p_value, r.threshold,
                        r.drifted, r.insufficient)
    score, limit = drift_score(point, direction), score_threshold(r.threshold, direction)
    return score / limit if score is not None and limit else 0.0


def lead_sentence(alert: Alert, results: list[DriftResult], window: str | None) -> tuple[str, DriftResult | None]:
    """What moved and how much against its threshold, in one sentence; and the result it names."""
    moved = [r for r in results if r.drifted]
    if not moved:
        return alert.summary, None
    worst = max(moved, key=_ratio)
    segment = "all traffic" if worst.segment == "*" else f"segment {worst.segment}"
    if direction_of(worst.test) == "p_value":
        what = (f"{worst.test} on {worst.feature} for {segment}: p = {worst.p_value:.2g}, at or below "
                f"its threshold {worst.threshold:.2g}")
    else:
        what = (f"{worst.test} on {worst.feature} for {segment} rose to {worst.statistic:.3g} against a "
                f"calibrated threshold of {worst.threshold:.3g} ({_ratio(worst):.1f}×)")
    others = len(moved) - 1
    tail = f"; {others} other signal{'s' if others != 1 else ''} moved too" if others else ""
    return f"{what}{' in ' + window if window else ''}{tail}.", worst


def example_prompts(session: Session, run: DriftRun, results: list[DriftResult]) -> list[str]:
    """Prompts of the window's new clusters (the moved region), as the report picks them."""
    from dashboards.report.build import cluster_views

    novel = [r for r in results if r.test == "new_cluster" and r.drifted]
    if not novel:
        return []
    model = session.scalar(select(Embedding.model).limit(1))
    frame = pd.DataFrame(fetch_window(session, run.window_start, run.window_end, embedding_model=model))
    if not len(frame):
        return []
    rows = [{"test": r.test, "feature": r.feature, "segment": r.segment, "drifted": r.drifted,
             "detail": r.detail} for r in novel]
    examples: list[str] = []
    for view in cluster_views(rows, frame):
        examples += view.examples
    return examples[:MAX_EXAMPLES]


def alert_context(session: Session, alert_id: int, now: datetime) -> dict:
    row = session.get(Alert, alert_id)
    if row is None:
        raise HTTPException(404, f"no alert {alert_id}")
    run = session.get(DriftRun, row.run_id) if row.run_id is not None else None
    results: list[DriftResult] = []
    window = None
    if run is not None:
        query = select(DriftResult).where(DriftResult.run_id == run.id)
        if row.segment != "*":
            query = query.where(DriftResult.segment == row.segment)
        results = list(session.scalars(query.order_by(DriftResult.test, DriftResult.feature)))
        window = f"{to_utc(run.window_start):%Y-%m-%d %H:%M} → {to_utc(run.window_end):%H:%M} UTC"
    lead, worst = lead_sentence(row, results, window)
    chart = None
    if worst is not None:
        chart = "/api/v1/series?" + urlencode({"kind": "drift", "range": "7d", "test": worst.test,
                                                "feature": worst.feature, "segment": worst.segment})
    examples = example_prompts(session, run, results) if run is not None and row.kind in ("prompt", "response",
                                                                                        "persona") else []
    deliveries = list(session.scalars(select(Delivery).where(Delivery.alert_id == alert_id).order_by(Delivery.id)))
    timeline = [{"at": to_utc(row.first_seen), "what": f"opened ({row.severity})", "who": "vigil", "note": ""}]
    timeline += [{"at": to_utc(a.at), "what": a.action + (f" until {to_utc(a.until):%Y-%m-%d %H:%M} UTC" if a.until else ""),
                  "who": a.actor, "note": a.note or ""} for a in actions(session, alert_id)]
    timeline += [{"at": to_utc(d.delivered_at or d.created_at),
                  "what": f"notification {d.status} ({d.format})", "who": "webhook", "note": ""} for d in deliveries]
    timeline.sort(key=lambda e: e["at"])
    has_report = run is not None and bool(run.report_path) and Path(run.report_path).is_file()
    snoozed = row.snoozed_until is not None and to_utc(row.snoozed_until) > now
    return {"alert": row, "run": run, "window": window, "has_report": has_report, "results": results,
            "lead": lead, "chart": chart, "examples": examples, "deliveries": deliveries,
            "timeline": timeline, "snoozed": snoozed,
            "evidence": json.dumps(row.evidence or {}, indent=2, sort_keys=True, default=str)}
