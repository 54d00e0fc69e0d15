"""The ingest quota counts bytes as well as rows: a tenant far under its row quota cannot fill
the disk with huge rows. Past `VIGIL_INGEST_BYTES_PER_MINUTE` a batch is a 429 that says which
quota, how much and when to retry, and nothing of it is stored or counted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sidecar_calls import ingest
from sqlalchemy import func, select

from sidecar.app import create_app
from sidecar.ingest.quota import BYTES, ROWS, IngestQuota
from storage.db import session_factory
from storage.models import Sample

TENANT_KEY = "bytes-quota-tenant-key-0123456789"
BIG = "x" * 20_000


def test_a_tenant_under_its_row_quota_is_stopped_by_its_byte_quota(migrated_db, make_settings):
    settings = make_settings(
        migrated_db,
        tenant_keys={TENANT_KEY: "acme"},
        ingest_rows_per_minute=1000,
        ingest_bytes_per_minute=100_000,
    )
    factory = session_factory(migrated_db)
    app = create_app(settings, factory)
    batch = [{"id": f"b-{i}", "prompt": BIG} for i in range(4)]  # ~80 KB, 4 rows
    assert ingest(app, TENANT_KEY, batch).status_code == 200
    more = [{"id": f"c-{i}", "prompt": BIG} for i in range(2)]  # 6 rows: far under 1000
    refused = ingest(app, TENANT_KEY, more)
    assert refused.status_code == 429, refused.text
    detail = refused.json()["detail"]
    assert "100000 bytes per minute (VIGIL_INGEST_BYTES_PER_MINUTE)" in detail, detail
    assert "tenant 'acme'" in detail and "nothing was stored" in detail
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    small = [{"id": "d-1", "prompt": "short"}]  # what is left of the minute still takes it
    assert ingest(app, TENANT_KEY, small).status_code == 200
    with factory() as s:
        assert s.scalar(select(func.count()).select_from(Sample)) == 5


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(st.tuples(st.floats(0, 120), st.integers(1, 40), st.integers(0, 5000)), max_size=60),
    st.integers(1, 100),
    st.integers(1, 20_000),
)
def test_neither_rows_nor_bytes_pass_their_limit_in_any_minute(calls, rows_limit, bytes_limit):
    now = [0.0]
    quota = IngestQuota(rows_limit, clock=lambda: now[0], bytes_per_minute=bytes_limit)
    admitted: list[tuple[float, int, int]] = []
    for step, rows, nbytes in calls:
        now[0] += step / 10
        wait, unit = quota.take_batch("t", rows, nbytes)
        if wait == 0:
            admitted.append((now[0], rows, nbytes))
        else:
            assert unit in (ROWS, BYTES) and 0 < wait <= 60 + 1e-9
    for start, _, _ in admitted:
        in_minute = [(r, b) for t, r, b in admitted if start <= t < start + 60]
        assert sum(r for r, _ in in_minute) <= rows_limit
        assert sum(b for _, b in in_minute) <= bytes_limit


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(("take", "charge", "room")),
            st.integers(0, 300),
            st.integers(0, 50),
            st.integers(0, 5_000),
        ),
        max_size=30,
    )
)
def test_charges_and_room_checks_read_the_same_minute_as_batches(calls):
    """A refused batch's charge and the before-parse room check share the batches' minute: after
    any mix of them, the room check says 0 exactly when one more row would be taken."""
    now = [0.0]
    quota = IngestQuota(40, clock=lambda: now[0], bytes_per_minute=4_000)
    for what, step, rows, nbytes in calls:
        now[0] += step / 10
        if what == "take":
            quota.take_batch("t", rows, nbytes)
        elif what == "charge":
            quota.charge("t", rows)
        else:
            wait = quota.wait_for_room("t")
            assert 0 <= wait <= 60
            rows_in_minute = sum(r for t, r, _ in quota._used.get("t", ()) if t > now[0] - 60)
            assert (wait == 0) == (rows_in_minute < 40)
