"""`/alerts/{id}`: one sentence of what moved, by how much, for whom and since when
(dashboards/alert_words.py), then the statistics behind it (dashboards/alert_lead.py), that
signal over the last days (chart), the run's results with the alert's own first, example prompts
behind its own signal (dashboards/alert_examples.py), the action timeline and the on-call
actions; evidence JSON behind a toggle."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import HTTPException
from sqlalchemy import select
from sqlalchemy.orm import Session

from alerts.lifecycle import actions
from alerts.runbooks import runbook
from dashboards.alert_examples import examples_for
from dashboards.alert_lead import lead_sentence, own_rows, table_rows
from dashboards.alert_words import effect_sentence, effect_size
from dashboards.timeline import notifications, opened
from storage.models import Alert, Delivery, DriftResult, DriftRun, Incident
from storage.types import to_utc

MAX_RUN_RESULTS = 5000


def alert_context(
    session: Session, alert_id: int, now: datetime, range_: str = "7d"
) -> dict[str, Any]:
    row = session.get(Alert, alert_id)
    if row is None:
        raise HTTPException(404, f"no alert {alert_id}")
    run = session.get(DriftRun, row.run_id) if row.run_id is not None else None
    results: list[DriftResult] = []
    window = None
    if run is not None:
        # every segment's rows: the table shows the alert's own first, then what moved elsewhere
        results = list(
            session.scalars(
                select(DriftResult)
                .where(DriftResult.run_id == run.id)
                .order_by(DriftResult.id)
                .limit(MAX_RUN_RESULTS)
            )
        )
        window = f"{to_utc(run.window_start):%Y-%m-%d %H:%M} → {to_utc(run.window_end):%H:%M} UTC"
    own = own_rows(row.evidence, results)
    worst = max([r for r in own if r.drifted] or own, key=effect_size, default=None)
    lead = effect_sentence(worst, row.summary, to_utc(row.first_seen))
    statistics = lead_sentence(
        row.summary, own, window, run.num_samples if run is not None else None, lead=worst
    )
    table, left_out = table_rows(row.segment, own, results)
    chart = None
    if worst is not None:
        chart = "/api/v1/series?" + urlencode(
            {
                "kind": "drift",
                "range": range_,
                "test": worst.test,
                "feature": worst.feature,
                "segment": worst.segment,
            }
        )
    examples = examples_for(session, run, own) if run is not None else []
    # the notifications that spoke for it: its incident's (members never notify on their own)
    spoke = (
        (Delivery.incident_id == row.incident_id)
        if row.incident_id is not None
        else (Delivery.alert_id == alert_id)
    )
    deliveries = list(session.scalars(select(Delivery).where(spoke).order_by(Delivery.id)))
    timeline = [opened(row)]
    timeline += [
        {
            "at": to_utc(a.at),
            "what": a.action + (f" until {to_utc(a.until):%Y-%m-%d %H:%M} UTC" if a.until else ""),
            "who": a.actor,
            "note": a.note or "",
        }
        for a in actions(session, alert_id)
    ]
    timeline += notifications(deliveries)
    timeline.sort(key=lambda e: e["at"])
    path = run.report_path if run is not None else None
    has_report = bool(path and Path(path).is_file())
    snoozed = row.snoozed_until is not None and to_utc(row.snoozed_until) > now
    return {
        "alert": row,
        "run": run,
        "window": window,
        "has_report": has_report,
        "results": table,
        "left_out": left_out,
        "range": range_,
        "lead": lead,
        "statistics": statistics,
        "chart": chart,
        "examples": examples,
        "deliveries": deliveries,
        "timeline": timeline,
        "snoozed": snoozed,
        "runbook": runbook(row, ""),
        "incident": session.get(Incident, row.incident_id) if row.incident_id is not None else None,
        "evidence": json.dumps(row.evidence or {}, indent=2, sort_keys=True, default=str),
    }
