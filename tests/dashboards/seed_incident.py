"""Test helper: an open drift incident over `seed_history`'s alert, its cause naming a new
tenant (a uniquely named module: tests import siblings by basename)."""

from __future__ import annotations

from storage.models import Alert, Incident

HEADLINE = (
    "New tenant newco (mobile) is 65 % of traffic since 07:12 UTC;"
    " its prompts: helm upgrade, terraform plan"
)


def seed_incident(session, data, *, severity: str = "high", headline: str = HEADLINE) -> int:
    cause = {
        "headline": headline,
        "order": ["prompt_psi|web"],
        "new_values": [{"feature": "tenant", "value": "newco", "share": 0.65, "count": 195}],
    }
    incident = Incident(
        group_key="drift",
        status="open",
        severity=severity,
        opened_severity=severity,
        kind="persona",
        headline=headline,
        cause=cause,
        run_id=data.drift_run_id,
        first_seen=data.now,
        last_seen=data.now,
        notifications=1,
    )
    session.add(incident)
    session.flush()
    session.get(Alert, data.alert_id).incident_id = incident.id
    session.commit()
    return incident.id
