"""`/alerts/{id}`: one sentence of the alert's own result (dashboards/alert_lead.py) and how far
past its threshold, that signal over the last days (chart), the run's results with the alert's
own first, example prompts from the moved region for embedding alerts, the action
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
from alerts.runbooks import runbook
from dashboards.alert_lead import lead_row, lead_sentence, own_rows, table_rows
from dashboards.timeline import notifications, opened
from storage.models import Alert, Delivery, DriftResult, DriftRun, Embedding, Incident
from storage.repositories.samples import fetch_window
from storage.types import to_utc

MAX_EXAMPLES = 8
EMBEDDING_TESTS = ("mmd", "new_cluster", "cluster_growth")
MAX_RUN_RESULTS = 5000


def example_prompts(session: Session, run: DriftRun, results: list[DriftResult]) -> list[str]:
    """Prompts of the window's new clusters (the moved region), as the report picks them."""
    from dashboards.report.build import cluster_views

    novel = [r for r in results if r.test == "new_cluster" and r.drifted]
    if not novel:
        return []
    model = session.scalar(select(Embedding.model).limit(1))
    frame = pd.DataFrame(
        fetch_window(session, run.window_start, run.window_end, embedding_model=model)
    )
    if not len(frame):
        return []
    rows = [
        {
            "test": r.test,
            "feature": r.feature,
            "segment": r.segment,
            "drifted": r.drifted,
            "detail": r.detail,
        }
        for r in novel
    ]
    examples: list[str] = []
    for view in cluster_views(rows, frame):
        examples += view.examples
    return examples[:MAX_EXAMPLES]


def alert_context(session: Session, alert_id: int, now: datetime, range_: str = "7d") -> dict:
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
    lead = lead_sentence(row.summary, own, window, run.num_samples if run is not None else None)
    worst = lead_row(own)
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
    mine = [
        r for r in results if r.segment == row.segment
    ] or results  # the alert's segment's clusters
    examples = (
        example_prompts(session, run, mine)
        if run is not None and row.kind in ("prompt", "response", "persona")
        else []
    )
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
    has_report = run is not None and bool(run.report_path) and Path(run.report_path).is_file()
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
        "chart": chart,
        "examples": examples,
        "deliveries": deliveries,
        "timeline": timeline,
        "snoozed": snoozed,
        "runbook": runbook(row, ""),
        "incident": session.get(Incident, row.incident_id) if row.incident_id is not None else None,
        "evidence": json.dumps(row.evidence or {}, indent=2, sort_keys=True, default=str),
    }
