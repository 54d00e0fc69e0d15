"""`/incidents/{id}`: the incident's headline (the run's cause in one sentence), what its
members are (ranked, the lead first, inhibited ones marked), the new values and topics behind
the headline, what to check first (the lead's runbook), its notifications and timeline, and
acknowledge / snooze / resolve for the incident and all its members. Forms post to
`/incidents/{id}/{action}`; API clients to `/api/v1/incidents/{id}/{action}` (admin key)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from alerts import incident_lifecycle, silences
from alerts.incidents import INHIBITED_KINDS, inhibitor, members, ranked
from alerts.lifecycle import actions
from alerts.runbooks import runbook
from dashboards.lifecycle_routes import add_action_routes
from dashboards.pages import RowId
from dashboards.templating import page
from dashboards.timeline import notifications, opened
from storage.models import Delivery, DriftRun, Incident
from storage.types import to_utc
from vigil.config import Settings


def incident_context(
    session: Session, incident_id: int, now: datetime, public_url: str
) -> dict[str, Any]:
    incident = session.get(Incident, incident_id)
    if incident is None:
        raise HTTPException(404, f"no incident {incident_id}")
    engine = inhibitor(session, incident) if incident.status == "open" else None
    inhibited = engine is not None
    everyone = ranked(incident, members(session, incident_id), inhibited)
    alive = [a for a in everyone if a.status == "open"]
    lead = alive[0] if alive else everyone[0] if everyone else None
    run = session.get(DriftRun, incident.run_id) if incident.run_id is not None else None
    report = run.report_path if run is not None else None
    deliveries = list(
        session.scalars(
            select(Delivery).where(Delivery.incident_id == incident_id).order_by(Delivery.id)
        )
    )
    timeline = [opened(incident)]
    seen = set()
    for alert in everyone:
        for a in actions(session, alert.id):
            key = (a.action, a.actor, to_utc(a.at))
            if key not in seen:  # an incident action is recorded on every member: show it once
                seen.add(key)
                timeline.append(
                    {"at": to_utc(a.at), "what": a.action, "who": a.actor, "note": a.note or ""}
                )
    timeline += notifications(deliveries)
    if incident.resolved_at is not None:
        timeline.append(
            {"at": to_utc(incident.resolved_at), "what": "resolved", "who": "vigil", "note": ""}
        )
    timeline.sort(key=lambda e: e["at"])
    cause = incident.cause or {}
    return {
        "incident": incident,
        "members": everyone,
        "lead": lead,
        "run": run,
        "inhibited_kinds": INHIBITED_KINDS if inhibited else frozenset(),
        "inhibitor": engine,
        "runbook": runbook(lead, public_url) if lead is not None else None,
        "new_values": cause.get("new_values") or [],
        "topics": cause.get("topics") or [],
        "worst": cause.get("worst"),
        "new_templates": cause.get("new_templates") or [],
        "why": cause.get("why") or {},
        "deliveries": deliveries,
        "timeline": timeline,
        "has_report": bool(report and Path(report).is_file()),
        "snoozed": incident.snoozed_until is not None and to_utc(incident.snoozed_until) > now,
        "silenced_by": silences.silencing(silences.active(session, now), alive)
        if incident.status == "open"
        else None,
    }


def build_incident_router(
    settings: Settings, session_factory: sessionmaker[Session], viewer: Callable[..., Any]
) -> APIRouter:
    router = APIRouter()

    @router.get("/incidents/{incident_id}", response_class=HTMLResponse)
    def incident_page(incident_id: RowId) -> HTMLResponse:
        with session_factory() as session:
            context = incident_context(session, incident_id, datetime.now(UTC), settings.public_url)
            incident = context["incident"]
            return page(
                "incident.html", title=f"Incident {incident.id} ({incident.severity})", **context
            )

    add_action_routes(
        router, noun="incident", lifecycle=incident_lifecycle, settings=settings,
        session_factory=session_factory, viewer=viewer,
    )  # fmt: skip
    return router
