"""The shared `migrated_db` fixture: every test starts on an empty database at head, even when
PostgreSQL schemas are reused from the pool (these two tests run in this order)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.db import session_scope
from storage.migrate import current_revision, head_revision
from storage.repositories import count_samples, create_baseline, insert_samples

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _dirty_then_check(url: str) -> None:
    assert current_revision(url) == head_revision()
    with session_scope(url) as s:
        assert count_samples(s) == 0  # nothing left by an earlier test
        baseline = create_baseline(s, "b", T0, T0 + timedelta(hours=1))
        assert baseline.id == 1  # sequences restarted
        insert_samples(s, [{"id": "left-behind", "prompt": "p"}])


def test_first_user_leaves_rows(migrated_db):
    _dirty_then_check(migrated_db)


def test_second_user_gets_an_empty_database(migrated_db):
    _dirty_then_check(migrated_db)
