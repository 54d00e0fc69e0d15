"""Silences and "this was expected" (SQLite and PostgreSQL). A silence whose matchers match
every alert of an incident stops its notification (the incident still opens); one that misses a
member does not; an expired one no longer holds. An incident marked expected is not notified
again, its members keep firing into it, a different change still pages, and the re-baseline
resolves it with the change recorded on every member."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_helpers import T0, make_run, make_settings, proposal
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select

from alerts import expected, silences
from alerts.lifecycle import LifecycleError, actions
from alerts.service import raise_alerts
from storage.models import Alert, Delivery, Incident, Silence

HOUR = timedelta(hours=1)


def window(sessions, conf, proposed, now):
    with sessions() as s, s.begin():
        raise_alerts(s, proposed, run_id=make_run(s, now), now=now, settings=conf)


def rows(sessions, model):
    with sessions() as s:
        return list(s.scalars(select(model).order_by(model.id)))


def newco():
    return [proposal(rule="token_psi", segment="tenant=newco", severity="high"),
            proposal(rule="latency_psi", kind="operational", segment="tenant=newco")]  # fmt: skip


def silence(sessions, matchers, ends=T0 + 4 * HOUR):
    with sessions() as s, s.begin():
        return silences.create(s, matchers=matchers, ends_at=ends, created_by="alice",
                               comment="newco onboarding", now=T0 - HOUR).id  # fmt: skip


@pytest.fixture
def clean(sessions):
    with sessions() as s, s.begin():
        s.execute(delete(Silence))
    yield
    with sessions() as s, s.begin():
        s.execute(delete(Silence))


def test_a_matching_silence_holds_the_notification(sessions, alerts_db, clean):
    conf = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    silence_id = silence(sessions, {"tenant": "new*"})
    window(sessions, conf, newco(), T0)
    assert len(rows(sessions, Incident)) == 1 and rows(sessions, Delivery) == []  # shown, quiet
    # a member outside the silence: the incident is told
    window(sessions, conf, [*newco(), proposal(rule="prompt_cluster_mix")], T0 + HOUR)
    assert len(rows(sessions, Delivery)) == 1
    with sessions() as s, s.begin():
        silences.expire(s, silence_id, T0 + HOUR)
        (row,) = silences.active(s, T0 - HOUR / 2)  # it was active before it expired
        assert silences.active(s, T0 + 2 * HOUR) == [] and row.id == silence_id


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    matchers=st.dictionaries(
        st.sampled_from(silences.LABELS),
        st.sampled_from(["*", "newco", "new*", "tenant=newco", "high", "token_psi", "acme"]),
        min_size=1,
    )
)
def test_matchers_against_an_oracle(matchers):
    alert = Alert(rule="token_psi", severity="high", segment="tenant=newco", kind="prompt",
                  evidence={"results": [{"feature": "prompt_tokens"}]})  # fmt: skip
    labels = {"rule": "token_psi", "severity": "high", "segment": "tenant=newco",
              "tenant": "newco", "feature": "prompt_tokens"}  # fmt: skip
    import fnmatch

    oracle = all(fnmatch.fnmatchcase(labels[k], v) for k, v in matchers.items())
    assert silences.matches(matchers, alert) == oracle


def test_bad_silences_are_refused(sessions, alerts_db):
    with sessions() as s:
        for matchers, ends, message in (
            ({}, T0 + HOUR, "at least one label"),
            ({"colour": "red"}, T0 + HOUR, "unknown label"),
            ({"tenant": "x"}, T0 - HOUR, "in the future"),
            ({"tenant": "x"}, T0 + timedelta(days=200), "at most 90 days"),
        ):
            with pytest.raises(silences.SilenceError, match=message):
                silences.create(s, matchers=matchers, ends_at=ends, created_by="a",
                                comment="c", now=T0)  # fmt: skip


def test_expected_stays_quiet_a_different_change_pages_and_rebaseline_resolves(sessions, alerts_db):
    conf = make_settings(alerts_db, ["http://127.0.0.1:9/a"])
    window(sessions, conf, newco(), T0)
    (incident,) = rows(sessions, Incident)
    with sessions() as s, s.begin():
        expected.mark_expected(s, incident.id, actor="bob", now=T0 + HOUR, note="newco signed")
        with pytest.raises(LifecycleError, match="already"):
            expected.mark_expected(s, incident.id, actor="bob", now=T0 + HOUR)
    # the same members fire again, more severe: it stays quiet and keeps them
    rising = [proposal(rule="token_psi", segment="tenant=newco", severity="critical"), *newco()[1:]]
    window(sessions, conf, rising, T0 + 2 * HOUR)
    assert len(rows(sessions, Incident)) == 1 and len(rows(sessions, Delivery)) == 1
    # a different change: an incident of its own, which pages
    window(sessions, conf, [*rising, proposal(rule="prompt_cluster_mix")], T0 + 3 * HOUR)
    first, other = rows(sessions, Incident)
    assert (first.id, other.status) == (incident.id, "open")
    assert [d.incident_id for d in rows(sessions, Delivery)] == [incident.id, other.id]
    with sessions() as s, s.begin():
        expected.rebaselined(s, s.get(Incident, incident.id), baseline_id=7,
                             now=T0 + 4 * HOUR, settings=conf)  # fmt: skip
    with sessions() as s:
        done = s.get(Incident, incident.id)
        assert (done.status, done.rebaseline_id) == ("resolved", 7)
        member = s.scalars(select(Alert).where(Alert.incident_id == incident.id)).first()
        assert [a.action for a in actions(s, member.id)] == ["expected", "rebaselined"]
    assert rows(sessions, Delivery)[-1].payload["event"] == "resolve"
