"""Which rows a capped window reads (SQLite and PostgreSQL): one definition for the drift
window's loader and the embed job's queue, fixed per sample (its draw), known while the window
fills."""

from __future__ import annotations

from collections import Counter
from hashlib import blake2b

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select, text
from window_mixes import HOUR, MODEL, T0, hour_records, mixes, sample_id

from storage.db import session_factory
from storage.draw import sample_draw
from storage.migrate import upgrade
from storage.models import Sample
from storage.repositories.embed_queue import queue_state, queued_samples, window_queue
from storage.repositories.samples import fetch_window, insert_samples
from storage.repositories.window_cap import stratum_quotas


def _reset(factory) -> None:
    with factory() as s:
        s.execute(delete(Sample))
        s.commit()


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(mix=mixes, cap=st.integers(1, 200), floor=st.integers(1, 60), tag=st.integers(0, 10**6))
def test_the_embed_queue_holds_exactly_the_rows_the_window_reads(migrated_db, mix, cap, floor, tag):
    factory = session_factory(migrated_db)
    _reset(factory)
    with factory() as s:
        insert_samples(s, hour_records(mix, str(tag)))
        s.commit()
        read = fetch_window(s, T0, T0 + HOUR, max_rows=cap, min_per_segment=floor, with_extra=False)
        queue = window_queue(s, T0, T0 + HOUR, max_rows=cap, min_per_segment=floor)
        queued = queued_samples(s, queue, MODEL, limit=10_000)
        waiting, _ = queue_state(s, queue, MODEL)
    assert {r["id"] for r in queued} == {r["id"] for r in read}
    assert waiting == len(read) == queue.read_rows == min(sum(mix.values()), cap)
    per_segment = Counter(r.get("segment") for r in read)
    present = {k: v for k, v in mix.items() if v}
    assert dict(per_segment) == {k: v for k, v in stratum_quotas(present, cap, floor).items() if v}
    # inside a thinned segment the kept rows are those with the smallest draws
    for seg, n in mix.items():
        kept = sorted(sample_draw(r["id"]) for r in read if r.get("segment") == seg)
        every = sorted(sample_draw(sample_id(str(tag), seg, i)) for i in range(n))
        assert kept == every[: len(kept)]


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(mix=mixes, cap=st.integers(1, 150), share=st.floats(0.1, 0.9))
def test_rows_read_from_the_full_window_were_read_while_it_filled(migrated_db, mix, cap, share):
    """What the embed job embedded during the hour covers what the closed window reads, unless
    a segment's quota shrank as the window filled (then the drift job's own embed run, at
    window close, picks up the difference)."""
    factory = session_factory(migrated_db)
    _reset(factory)
    records = hour_records(mix, "f")
    cut = T0 + HOUR * share
    with factory() as s:
        insert_samples(s, [r for r in records if r["timestamp"] < cut.isoformat()])
        s.commit()
        early = window_queue(s, T0, T0 + HOUR, max_rows=cap, min_per_segment=20)
        early_ids = {r["id"] for r in queued_samples(s, early, MODEL, limit=10_000)}
        insert_samples(s, [r for r in records if r["timestamp"] >= cut.isoformat()])
        s.commit()
        final = fetch_window(s, T0, T0 + HOUR, max_rows=cap, min_per_segment=20, with_extra=False)
    for seg in mix:
        early_quota = early.selection.strata.get(seg)
        final_quota = stratum_quotas({k: v for k, v in mix.items() if v}, cap, 20).get(seg, 0)
        before_cut = {
            r["id"] for r in final if r.get("segment") == seg and r["timestamp"] < cut.isoformat()
        }
        if early_quota is not None and early_quota.quota >= final_quota:
            assert before_cut <= early_ids


def test_draw_is_a_keyed_63_bit_hash_of_thesample_id():
    ids = [f"s{i}" for i in range(2000)]
    draws = [sample_draw(i) for i in ids]
    assert all(0 <= d < 2**63 for d in draws) and len(set(draws)) == len(ids)
    assert (
        sample_draw("s1")
        == int.from_bytes(blake2b(b"s1", digest_size=8, key=b"vigil-window-draw").digest(), "big")
        >> 1
    )
    assert abs(sum(d < 2**62 for d in draws) / len(draws) - 0.5) < 0.05  # half below the middle


def test_every_insert_path_sets_the_draw(migrated_db):
    factory = session_factory(migrated_db)
    with factory() as s:
        insert_samples(s, [{"id": "core", "prompt": "p"}])
        s.add(Sample(id="orm", timestamp=T0, sample_weight=1.0, source="engine"))
        s.commit()
        assert dict(s.execute(select(Sample.id, Sample.draw)).all()) == {
            "core": sample_draw("core"),
            "orm": sample_draw("orm"),
        }


def test_the_migration_gives_existing_rows_their_draw(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, revision="0009")
    factory = session_factory(url)
    with factory() as s:
        for i in range(7):
            s.execute(
                text(
                    "INSERT INTO samples (id, timestamp, sample_weight, source) "
                    "VALUES (:i, '2026-11-30 10:00:00', 1.0, 'engine')"
                ),
                {"i": f"old{i}"},
            )
        s.commit()
    upgrade(url)
    with session_factory(url)() as s:
        got = dict(s.execute(select(Sample.id, Sample.draw)).all())
    assert got == {f"old{i}": sample_draw(f"old{i}") for i in range(7)}


def test_the_queue_goes_on_past_a_key_without_repeating_or_skipping(migrated_db):
    factory = session_factory(migrated_db)
    with factory() as s:
        insert_samples(s, hour_records({"web": 70, "api": 40, None: 9}, "k"))
        s.commit()
        queue = window_queue(s, T0, T0 + HOUR, max_rows=50, min_per_segment=5)
        every = [r["id"] for r in queued_samples(s, queue, MODEL, limit=10_000)]
        pages, after = [], None
        while batch := queued_samples(s, queue, MODEL, limit=7, after=after):
            pages += [r["id"] for r in batch]
            after = batch[-1]["key"]
    assert pages == every and len(every) == 50
