"""A one-hour window read by its hour bucket (SQLite and PostgreSQL): the same rows, strata and
weights as the timestamp range, whatever lies just outside the hour; and a capped read whose
table reads follow the rows it keeps, not the rows the hour holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from alembic import command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_rules import captured
from sqlalchemy import delete, insert, inspect, select, text
from window_mixes import HOUR, T0

from storage.db import dispose_engines, get_engine, make_engine, session_factory
from storage.hour import is_hour_start, sample_hour
from storage.migrate import alembic_config, upgrade
from storage.models import Sample
from storage.repositories.samples import read_window, window_columns, window_filter
from storage.repositories.window_cap import capped_rows, window_selection

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SEGMENTS = ["web", "api", "rare", None]


@given(
    moment=st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)),
    offset_min=st.integers(-14 * 60, 14 * 60),
)
def test_the_hour_bucket_holds_the_timestamp(moment, offset_min):
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_min)))
    seconds = (aware - EPOCH).total_seconds()
    hour = sample_hour(aware)
    assert hour * 3600 <= seconds < (hour + 1) * 3600
    assert sample_hour(moment) == sample_hour(moment.replace(tzinfo=UTC))  # naive is UTC
    assert is_hour_start(aware) == (aware == EPOCH + timedelta(hours=hour))


def test_only_one_whole_hour_is_written_on_the_bucket():
    assert [str(t) for t in window_filter(T0, T0 + HOUR)] == ["samples.hour = :hour_1"]
    for start, end in [(T0 + timedelta(minutes=1), T0 + HOUR), (T0, T0 + 3 * HOUR)]:
        assert all("timestamp" in str(t) for t in window_filter(start, end))


# offsets in µs from T0: inside the hour, on its edges and just outside (before, at the end)
edges = st.sampled_from([-1, 0, 1, 3_599_999_999, 3_600_000_000, 3_600_000_001, -3_600_000_000])
offsets = st.one_of(st.integers(-7_200_000_000, 7_200_000_000), edges)
rows_strategy = st.lists(
    st.tuples(offsets, st.sampled_from(SEGMENTS), st.floats(0.5, 4.0)), min_size=0, max_size=120
)


def _timestamp_read(session, cap: int, floor: int) -> dict[str, float]:
    """The capped read as the timestamp range gives it (the terms before the hour bucket)."""
    terms = [Sample.timestamp >= T0, Sample.timestamp < T0 + HOUR]
    selection = window_selection(session, terms, cap, floor)
    rows = capped_rows(session, terms, window_columns(False), selection)
    kept: dict[str | None, float] = {}
    for row in rows:
        kept[row.segment] = kept.get(row.segment, 0.0) + row.sample_weight
    out = {}
    for row in rows:
        st_ = selection.strata[row.segment]
        scale = st_.weight / kept[row.segment] if st_.quota < st_.rows else 1.0
        out[row.id] = row.sample_weight * scale
    return out


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rows=rows_strategy, cap=st.integers(1, 80), floor=st.integers(1, 30))
def test_the_hour_read_is_the_timestamp_read(migrated_db, rows, cap, floor):
    factory = session_factory(migrated_db)
    with factory() as s:
        s.execute(delete(Sample))
        values = [
            {"id": f"r{i}", "timestamp": T0 + timedelta(microseconds=us), "segment": seg,
             "sample_weight": w, "source": "engine"}
            for i, (us, seg, w) in enumerate(rows)
        ]  # fmt: skip
        if values:
            s.execute(insert(Sample), values)
        s.commit()
        expected = _timestamp_read(s, cap, floor)
        got = read_window(s, T0, T0 + HOUR, max_rows=cap, min_per_segment=floor, with_extra=False)
        whole = read_window(s, T0, T0 + HOUR, with_extra=False)
    inside = {f"r{i}" for i, (us, _, _) in enumerate(rows) if 0 <= us < 3_600_000_000}
    assert {r["id"] for r in whole.records} == inside
    assert {r["id"]: r["sample_weight"] for r in got.records} == expected
    stamps = [(r["timestamp"], r["id"]) for r in got.records]
    assert stamps == sorted(stamps)  # oldest first, as before


def _seed_hour(url: str, n: int) -> None:
    """`n` rows in the hour from T0 (three segments, 5 % in a rare one) and rows around it."""
    engine = get_engine(url)
    rows = [
        {"id": f"s{i}", "timestamp": T0 + HOUR * (i / n), "sample_weight": 1.0 + i % 3,
         "segment": "rare" if i % 20 == 0 else ("web" if i % 2 else "api"), "source": "engine",
         "prompt": "p" * 200, "response": "r" * 400}
        for i in range(n)
    ]  # fmt: skip
    after = rows[:: n // 500]
    rows += [{**r, "id": f"o{r['id']}", "timestamp": r["timestamp"] + HOUR} for r in after]
    with engine.begin() as conn:
        conn.execute(delete(Sample))
        conn.execute(insert(Sample), rows)
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                "VACUUM ANALYZE samples"
            )
        else:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()


def _heap_rows(engine, statements) -> int:
    """Rows the statements fetch from the `samples` table itself (PostgreSQL's EXPLAIN
    ANALYZE: rows returned plus rows a filter threw away, by every node that reads the table
    rather than only an index)."""
    total = 0
    with engine.connect() as conn:
        for sql, params in statements:
            raw = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).scalar_one()
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
            stack = [plan]
            while stack:
                node = stack.pop()
                stack += node.get("Plans", [])
                if node.get("Relation Name") != "samples":
                    continue
                loops = node.get("Actual Loops", 1)
                if node["Node Type"] == "Index Only Scan":
                    total += node.get("Heap Fetches", 0)
                else:
                    rows = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                    total += (rows + node.get("Rows Removed by Index Recheck", 0)) * loops
    return total


def test_the_capped_read_fetches_only_the_kept_rows(migrated_db):
    """20,000 rows in the hour, a cap of 300 (vectors for 100): the table rows read stay within
    a small multiple of the kept rows; the per-segment counts come from the index alone."""
    cap, nested = 300, 100
    _seed_hour(migrated_db, 20_000)
    engine = get_engine(migrated_db)
    with session_factory(migrated_db)() as s, captured(engine) as statements:
        read = read_window(s, T0, T0 + HOUR, max_rows=cap, max_embedded_rows=nested)
    assert len(read.records) == cap and len(read.vector_ids or ()) == nested
    samples_reads = [(q, p) for q, p in statements if "FROM samples" in q]
    if engine.dialect.name == "postgresql":
        assert _heap_rows(engine, samples_reads) <= 3 * (cap + nested)
        return
    with engine.connect() as conn:
        for sql, params in samples_reads:
            steps = [str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)]
            on_samples = [x for x in steps if " samples " in f" {x} "]
            assert on_samples and all("ix_samples_hour_segment_draw" in x for x in on_samples), (
                sql,
                steps,
            )
            if "count(" in sql:
                assert all("COVERING INDEX" in x for x in on_samples)


def _downgrade(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def test_the_migration_fills_old_rows_and_goes_back_down(db_url):
    upgrade(db_url, revision="0014")
    stamps = [T0 + timedelta(minutes=37 * i) for i in range(9)]
    with session_factory(db_url)() as s:
        for i, ts in enumerate(stamps):
            s.execute(
                text("INSERT INTO samples (id, record_id, timestamp, sample_weight, source) "
                     "VALUES (:i, :i, :t, 1.0, 'engine')"),
                {"i": f"old{i}", "t": ts.replace(tzinfo=None) if "sqlite" in db_url else ts},
            )  # fmt: skip
        s.commit()
    dispose_engines()
    assert upgrade(db_url) == "0015"
    with session_factory(db_url)() as s:
        got = dict(s.execute(select(Sample.id, Sample.hour)).all())
    assert got == {f"old{i}": sample_hour(ts) for i, ts in enumerate(stamps)}
    dispose_engines()
    _downgrade(db_url, "0014")
    engine = get_engine(db_url)
    columns = {c["name"] for c in inspect(engine).get_columns("samples")}
    indexes = {i["name"] for i in inspect(engine).get_indexes("samples")}
    assert "hour" not in columns and "ix_samples_hour_segment_draw" not in indexes
    dispose_engines()
    assert upgrade(db_url) == "0015"
