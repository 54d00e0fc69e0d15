"""Sample ids are unique per tenant: the same id under another tenant is another sample (not a
duplicate that drops it), duplicates are reported within the caller's tenant only, and
migration 0008 keeps every stored row, its id and its child rows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text

import storage.repositories.sample_insert as sample_insert
from storage.db import make_engine, session_scope
from storage.migrate import head_revision, upgrade
from storage.models import EvalScore, Sample
from storage.repositories import fetch_window, insert_samples
from storage.repositories.sample_insert import scoped_id

T0 = datetime(2026, 11, 29, 10, tzinfo=UTC)


def rec(rid: str, tenant: str | None, **extra) -> dict:
    return {
        "id": rid,
        "prompt": f"{tenant}:{rid}",
        "tenant": tenant,
        "timestamp": T0.timestamp(),
        **extra,
    }


def rows(url: str) -> dict[tuple[str | None, str], tuple[str, str]]:
    with session_scope(url) as s:
        return {
            (t, r): (i, p)
            for i, t, r, p in s.execute(
                select(Sample.id, Sample.tenant, Sample.record_id, Sample.prompt)
            )
        }


def test_another_tenants_id_is_another_sample(migrated_db):
    """Was: tenant B sending A's id got `inserted 0` and its sample was dropped."""
    with session_scope(migrated_db) as s:
        assert insert_samples(s, [rec("x1", "acme", eval_judge=4.0), rec("x2", "acme")]) == 2
    with session_scope(migrated_db) as s:
        assert insert_samples(s, [rec("x1", "globex", eval_judge=1.0), rec("x1", None)]) == 2
    with session_scope(migrated_db) as s:  # repeats, each within its own tenant
        assert insert_samples(s, [rec("x1", "acme"), rec("x1", "globex"), rec("x1", None)]) == 0
    stored = rows(migrated_db)
    assert stored[("acme", "x1")] == ("x1", "acme:x1")  # the first holder keeps the readable id
    assert stored[("globex", "x1")] == (scoped_id("globex", "x1"), "globex:x1")
    assert stored[(None, "x1")] == (scoped_id(None, "x1"), "None:x1")
    with session_scope(migrated_db) as s:  # each sample keeps its own eval score
        scores = dict(
            s.execute(
                select(Sample.tenant, EvalScore.score).join(
                    EvalScore, EvalScore.sample_id == Sample.id
                )
            ).all()
        )
    assert scores == {"acme": 4.0, "globex": 1.0}
    with session_scope(migrated_db) as s:
        window = fetch_window(s, T0, T0.replace(hour=11))
    assert sorted(r["prompt"] for r in window) == ["None:x1", "acme:x1", "acme:x2", "globex:x1"]


def test_one_batch_with_an_id_under_two_tenants_stores_both(migrated_db):
    with session_scope(migrated_db) as s:
        assert insert_samples(s, [rec("b1", "acme"), rec("b1", "globex"), rec("b1", "acme")]) == 2
    assert set(rows(migrated_db)) == {("acme", "b1"), ("globex", "b1")}


def test_a_lost_race_for_a_record_id_is_retried_under_the_scoped_id(migrated_db, monkeypatch):
    """Another session stored the same record id for another tenant between the check and the
    insert: the insert is skipped on the stored id, found out and retried, not lost."""
    with session_scope(migrated_db) as s:
        insert_samples(s, [rec("r1", "acme")])
    monkeypatch.setattr(sample_insert, "_stored_and_taken", lambda session, ids: (set(), set()))
    with session_scope(migrated_db) as s:
        assert insert_samples(s, [rec("r1", "globex")]) == 1
    assert rows(migrated_db)[("globex", "r1")][0] == scoped_id("globex", "r1")


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["acme", "globex", None])),
        max_size=12,
    )
)
def test_every_key_is_stored_once_whatever_the_order(db_url_module, keys):
    upgrade(db_url_module)
    with session_scope(db_url_module) as s:
        s.execute(text("DELETE FROM samples"))
    half = len(keys) // 2
    total = 0
    for part in (keys[:half], keys[half:], keys):
        with session_scope(db_url_module) as s:
            total += insert_samples(s, [rec(rid, tenant) for rid, tenant in part])
    stored = rows(db_url_module)
    assert set(stored) == {(t, r) for r, t in keys} and total == len(stored)
    assert len({sid for sid, _ in stored.values()}) == len(stored)


def test_upgrade_from_0007_keeps_rows_ids_and_child_rows(db_url):
    upgrade(db_url, "0007")
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            for sid, tenant in (("old-1", "acme"), ("old-2", None), ("old-3", "globex")):
                conn.execute(
                    text(
                        "INSERT INTO samples"
                        " (id, timestamp, tenant, prompt, sample_weight, source) "
                        "VALUES (:i, :ts, :t, 'p', 1.0, 'ingest')"
                    ),
                    {"i": sid, "t": tenant, "ts": T0},
                )
            conn.execute(
                text(
                    "INSERT INTO eval_scores (sample_id, name, score, created_at) "
                    "VALUES ('old-1', 'judge', 3.0, :ts)"
                ),
                {"ts": T0},
            )
    finally:
        engine.dispose()
    assert upgrade(db_url) == head_revision()
    stored = rows(db_url)
    assert {k: v[0] for k, v in stored.items()} == {
        ("acme", "old-1"): "old-1",
        (None, "old-2"): "old-2",
        ("globex", "old-3"): "old-3",
    }
    with session_scope(db_url) as s:
        assert s.scalar(select(EvalScore.score).where(EvalScore.sample_id == "old-1")) == 3.0
        # an old id under its own tenant is a duplicate; under another tenant a new sample
        assert (
            insert_samples(s, [rec("old-1", "acme"), rec("old-1", "globex"), rec("old-2", None)])
            == 1
        )
    assert rows(db_url)[("globex", "old-1")][0] == scoped_id("globex", "old-1")


def test_rows_built_without_a_record_id_get_their_id(migrated_db):
    with session_scope(migrated_db) as s:
        s.add(Sample(id="direct", timestamp=T0, tenant="acme", sample_weight=1.0, source="engine"))
    assert rows(migrated_db)[("acme", "direct")][0] == "direct"


@pytest.mark.parametrize("tenant", ["acme", None, "ü:~\x7f"])
def test_scoped_ids_fit_the_column_and_never_look_like_a_record_id(tenant):
    sid = scoped_id(tenant, "x" * 64)
    assert len(sid) == 64 and sid.startswith("~") and sid != scoped_id("other", "x" * 64)
