"""`/incidents` (the list page) and `/api/v1/incidents` (the same rows as JSON), filtered by
state, severity and segment (a drift label such as `tenant=newco`; an incident matches when its
cause or one of its alerts names it). A bad filter is a 422 that names it."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session, sessionmaker

from dashboards.incident_list import (
    SEVERITY_CHOICES,
    STATES,
    IncidentFilter,
    as_json,
    list_incidents,
)
from dashboards.templating import page

# built from the one list of states; mypy reads only literal members, hence the ignore
State = StrEnum("State", {s: s for s in STATES})  # type: ignore[misc]
OPEN = State("open")
# a form sends an empty field for "any": "" means no filter; anything else must be a severity
SeverityOrAny = Annotated[str, Query(pattern="^(" + "|".join(SEVERITY_CHOICES) + ")?$")]
SliceOrAny = Annotated[str, Query(max_length=143, pattern=r"^[^\x00]*$")]


def build_incident_list_router(session_factory: sessionmaker[Session]) -> APIRouter:
    router = APIRouter()

    def rows(state: State, severity: str, segment: str) -> list[dict[str, Any]]:
        wanted = IncidentFilter(state=state.value, severity=severity or None,
                                segment=segment or None)  # fmt: skip
        with session_factory() as session:
            return list_incidents(session, datetime.now(UTC), wanted)

    @router.get("/incidents", response_class=HTMLResponse)
    def incidents_page(
        state: Annotated[State, Query()] = OPEN,
        severity: SeverityOrAny = "",
        segment: SliceOrAny = "",
    ) -> HTMLResponse:
        return page(
            "incidents.html",
            title="Incidents",
            incidents=rows(state, severity, segment),
            states=STATES,
            severities=SEVERITY_CHOICES,
            chosen={"state": state.value, "severity": severity, "segment": segment},
        )

    @router.get("/api/v1/incidents")
    def incidents_api(
        state: Annotated[
            State, Query(description="open (every unresolved one), " + ", ".join(STATES[1:]))
        ] = OPEN,
        severity: SeverityOrAny = "",
        segment: SliceOrAny = "",
    ) -> dict[str, Any]:
        found = rows(state, severity, segment)
        return {"incidents": [as_json(r) for r in found], "count": len(found)}

    return router
