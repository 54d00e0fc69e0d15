"""An incident keeps its history (SQLite and PostgreSQL): whatever on-call does — acknowledge,
snooze, a window where the lead stops firing, resolve by hand — its severity is the highest it
reached, it still reads as opened at the severity it opened at, and its resolve notification is
led by the same alert as its trigger."""

from __future__ import annotations

from datetime import timedelta

from alert_helpers import T0, make_run, make_settings, proposal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select

from alerts import incident_lifecycle
from alerts.lifecycle import LifecycleError
from alerts.service import raise_alerts
from storage.models import Alert, AlertAction, Delivery, DriftRun, Incident

HOUR = timedelta(hours=1)
STEPS = ("acknowledge", "snooze", "lead_quiet", "same_again", "resolve")


def members(lead_fires: bool = True) -> list[dict]:
    """Moderate members raised before the high one, so the lead is not the lowest id."""
    out = [
        proposal(rule="token_psi", segment="tenant=newco"),
        proposal(rule="latency_psi", kind="operational", segment="segment=mobile"),
    ]
    if lead_fires:
        out.append(proposal(rule="prompt_cluster_mix", severity="high"))
    return out


def run_window(sessions, conf, proposed, now) -> None:
    with sessions() as s, s.begin():
        raise_alerts(s, proposed, run_id=make_run(s, now), now=now, settings=conf)


def apply(sessions, conf, step: str, incident_id: int, now) -> None:
    if step in ("lead_quiet", "same_again"):
        run_window(sessions, conf, members(step == "same_again"), now)
        return
    with sessions() as s, s.begin():
        try:
            if step == "acknowledge":
                incident_lifecycle.acknowledge(s, incident_id, actor="alice", now=now)
            elif step == "snooze":
                incident_lifecycle.snooze(s, incident_id, actor="bob", until=now + HOUR, now=now)
            else:
                incident_lifecycle.resolve(s, incident_id, actor="carol", now=now, settings=conf)
        except LifecycleError:
            pass  # an action on a resolved incident is refused; history must still hold


def empty(sessions) -> None:
    with sessions() as s, s.begin():
        for table in (AlertAction, Delivery, Alert, Incident, DriftRun):
            s.execute(delete(table))


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.sampled_from(STEPS), min_size=1, max_size=5))
def test_acting_on_an_incident_never_rewrites_it(sessions, alerts_db, steps):
    empty(sessions)
    conf = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    run_window(sessions, conf, members(), T0)
    with sessions() as s:
        (incident,) = s.scalars(select(Incident)).all()
        trigger = s.scalars(select(Delivery)).one()
    assert (incident.severity, incident.opened_severity) == ("high", "high")
    for i, step in enumerate([*steps, "resolve"]):
        apply(sessions, conf, step, incident.id, T0 + (i + 1) * HOUR)
    with sessions() as s:
        seen = s.scalars(select(Incident).order_by(Incident.id)).first()
        rows = list(s.scalars(select(Delivery).where(Delivery.incident_id == incident.id)))
    assert seen.status == "resolved"
    assert (seen.severity, seen.opened_severity) == ("high", "high")
    (resolve,) = [r for r in rows if r.payload["event"] == "resolve"]
    assert resolve.alert_id == trigger.alert_id
    assert resolve.payload["alert"]["rule"] == "prompt_cluster_mix"
    assert resolve.payload["incident"]["severity"] == "high"
