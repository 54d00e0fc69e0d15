""" "This was expected", end to end on SQLite and PostgreSQL: a drift window opens an incident,
on-call marks it expected, the rebaseline job waits until enough traffic came after the change,
then builds a baseline from it, validates and activates it, and resolves the incident, with the
change recorded on its alerts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sidecar_world import prepare
from sqlalchemy import select

from alerts.expected import mark_expected
from alerts.lifecycle import actions
from sidecar.jobs.drift import run_drift_job
from sidecar.jobs.rebaseline import run_rebaseline_job
from storage.db import session_factory
from storage.models import Alert, Baseline, Incident


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["postgresql"], indirect=True)
def test_an_expected_change_becomes_the_baseline(migrated_db, make_settings, embedder):
    settings = make_settings(migrated_db, webhook_targets=[], rebaseline_min_samples=10_000)
    factory = session_factory(migrated_db)
    world = prepare(settings, factory, None)
    now = datetime.now(UTC)
    [window] = run_drift_job(settings, factory, now).windows
    assert window.status == "done"
    with factory() as s, s.begin():
        incident = s.scalars(select(Incident).where(Incident.status == "open")).first()
        assert incident is not None, "the drift window opened no incident"
        mark_expected(s, incident.id, actor="alice", now=now, note="the new topic is planned")
        incident_id = incident.id
    waiting = run_rebaseline_job(settings, factory, now + timedelta(minutes=5))
    assert waiting.waiting == {incident_id: len(world.drift_records)} and not waiting.activated
    ready = make_settings(migrated_db, webhook_targets=[], rebaseline_min_samples=100)
    done = run_rebaseline_job(ready, factory, now + timedelta(minutes=10))
    assert list(done.activated) == [incident_id], done
    with factory() as s:
        incident = s.get(Incident, incident_id)
        baseline = s.get(Baseline, done.activated[incident_id])
        assert (incident.status, incident.rebaseline_id) == ("resolved", baseline.id)
        assert baseline.status == "active" and baseline.validated_at is not None
        assert baseline.window_start <= world.window[0] + timedelta(seconds=1)
        member = s.scalars(select(Alert).where(Alert.incident_id == incident_id)).first()
        assert [a.action for a in actions(s, member.id)] == ["expected", "rebaselined"]
