"""Fixtures for the alerts tests: the receiver, a fake clock, settings pointing at the receiver,
and a migrated database (SQLite and PostgreSQL) per module whose alert tables are emptied
before each test."""

from __future__ import annotations

import pytest
from alert_helpers import SECRET, FakeClock, Receiver, make_settings
from sqlalchemy import delete

from storage.db import session_factory
from storage.models import Alert, Delivery, DriftRun, Incident


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def receiver(clock):
    r = Receiver(SECRET, clock).start()
    yield r
    r.stop()


@pytest.fixture
def alerts_db(migrated_db_module) -> str:
    """A migrated database (sqlite and postgresql) with empty alert tables for this test."""
    with session_factory(migrated_db_module)() as session, session.begin():
        session.execute(delete(Delivery))
        session.execute(delete(Alert))
        session.execute(delete(Incident))
        session.execute(delete(DriftRun))
    return migrated_db_module


@pytest.fixture
def sessions(alerts_db):
    return session_factory(alerts_db)


@pytest.fixture
def settings(alerts_db, receiver):
    return make_settings(alerts_db, [receiver.url])
