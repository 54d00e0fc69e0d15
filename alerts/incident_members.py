"""An incident's members: which are open, the order they are shown and told in (the lead
first), and which one led its trigger (the resolve is led by the same alert). Functions take the
caller's session and never commit."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from alerts.proposal import SEVERITY_RANK
from storage.models import Alert, Delivery, Incident

INHIBITED_KINDS = frozenset({"model", "eval"})  # what a failing canary already explains


def open_members(session: Session, incident: Incident) -> list[Alert]:
    return list(
        session.scalars(
            select(Alert)
            .where(Alert.incident_id == incident.id, Alert.status == "open")
            .order_by(Alert.id)
        )
    )


def members(session: Session, incident_id: int) -> list[Alert]:
    return list(
        session.scalars(select(Alert).where(Alert.incident_id == incident_id).order_by(Alert.id))
    )


def ranked(incident: Incident, alerts: list[Alert], inhibited: bool) -> list[Alert]:
    """Members in the order they are shown and told: uninhibited first, then by severity, then
    by the cause's ranking (traffic share x effect, `drift.cause.ranking`), then by id."""
    order = {k: i for i, k in enumerate((incident.cause or {}).get("order") or [])}
    return sorted(
        alerts,
        key=lambda a: (
            inhibited and a.kind in INHIBITED_KINDS,
            -SEVERITY_RANK[a.severity],
            order.get(a.dedupe_key, len(order)),
            a.id,
        ),
    )


def trigger_lead_id(session: Session, incident_id: int) -> int | None:
    """The alert that led the incident's latest trigger notification (its deliveries name it)."""
    return session.scalars(
        select(Delivery.alert_id)
        .where(
            Delivery.incident_id == incident_id,
            Delivery.idempotency_key.like(f"vigil-i{incident_id}-trigger-%"),
        )
        .order_by(Delivery.id.desc())
        .limit(1)
    ).first()


def led_by_trigger_lead(session: Session, incident: Incident) -> list[Alert]:
    """Every member ranked, the trigger's lead first: the resolve speaks of what paged."""
    everyone = ranked(incident, members(session, incident.id), inhibited=False)
    lead_id = trigger_lead_id(session, incident.id)
    return sorted(everyone, key=lambda a: a.id != lead_id)


def expected_members(session: Session, group: list[Alert]) -> tuple[list[Incident], list[Alert]]:
    """(the open incidents marked expected that hold some of `group`, the rest of `group`): an
    expected change's members keep firing into it; anything else opens or joins another."""
    joined = {a.incident_id for a in group if a.incident_id is not None}
    if not joined:
        return [], group
    expected = list(
        session.scalars(
            select(Incident).where(
                Incident.id.in_(joined),
                Incident.status == "open",
                Incident.expected_at.is_not(None),
            )
        )
    )
    ids = {i.id for i in expected}
    return expected, [a for a in group if a.incident_id not in ids]


def open_incident_for(session: Session, key: str, group: list[Alert]) -> Incident | None:
    """The open, not expected, incident these alerts join: the one they already belong to, else
    their group's newest."""
    joined = {a.incident_id for a in group if a.incident_id is not None}
    query = select(Incident).where(Incident.status == "open", Incident.expected_at.is_(None))
    if joined:
        found = session.scalars(
            query.where(Incident.id.in_(joined)).order_by(Incident.id.desc())
        ).first()
        if found is not None:
            return found
    return session.scalars(
        query.where(Incident.group_key == key).order_by(Incident.id.desc())
    ).first()
