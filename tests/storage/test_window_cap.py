"""A drift window read under a row cap (SQLite and PostgreSQL): stratified by segment, minorities
keep a floor, weighted totals per segment are the full window's, only the needed columns read."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from storage.db import get_engine, session_factory
from storage.repositories.samples import fetch_window, insert_samples
from storage.repositories.window_cap import stratum_quotas

T0 = datetime(2026, 11, 30, 10, tzinfo=UTC)
SEGMENTS = {
    "web": (450, (1.0, 1.5)),
    "api": (120, (2.5,)),
    "rare": (30, (10.0,)),
    None: (24, (4.0,)),
}


def _records() -> list[dict]:
    out = []
    for seg, (n, weights) in SEGMENTS.items():
        for i in range(n):
            rec = {
                "id": f"{seg}-{i}",
                "timestamp": (T0 + timedelta(seconds=3590 * i / n + len(str(seg)))).isoformat(),
                "prompt": f"q {i}",
                "response": "a",
                "prompt_tokens": 3,
                "sample_weight": weights[i % len(weights)],
            }
            if seg is not None:
                rec["segment"] = seg
            out.append(rec)  # fmt: skip
    return out


def _totals(records: list[dict]) -> tuple[Counter, dict]:
    rows, weight = Counter(), defaultdict(float)
    for r in records:
        rows[r.get("segment")] += 1
        weight[r.get("segment")] += r["sample_weight"]
    return rows, weight


def test_capped_window_keeps_shares_floors_and_weighted_totals(migrated_db):
    factory = session_factory(migrated_db)
    with factory() as s:
        insert_samples(s, _records())
        s.commit()
    statements: list[str] = []
    engine = get_engine(migrated_db)
    listener = lambda *args: statements.append(args[2])  # noqa: E731 (statement text)
    event.listen(engine, "before_cursor_execute", listener)
    try:
        with factory() as s:
            full = fetch_window(s, T0, T0 + timedelta(hours=1))
            statements.clear()
            capped = fetch_window(
                s, T0, T0 + timedelta(hours=1), max_rows=200, min_per_segment=40, with_extra=False
            )
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    full_rows, full_weight = _totals(full)
    rows, weight = _totals(capped)
    assert len(full) == 624 and len(capped) == 200
    assert rows == stratum_quotas(dict(full_rows), 200, 40)
    assert rows["rare"] >= 24 and rows[None] == 24  # minorities keep the floor (or all they have)
    assert rows["web"] > rows["api"] > rows["rare"]  # the rest follows the window's shares
    for seg in full_weight:  # each segment's weighted total is the full window's
        assert weight[seg] == pytest.approx(full_weight[seg], rel=1e-9)
    stamps = [r["timestamp"] for r in capped]
    assert stamps == sorted(stamps) and len({r["id"] for r in capped}) == 200
    web = [r["timestamp"] for r in capped if r.get("segment") == "web"]
    assert (
        web[0] < (T0 + timedelta(minutes=5)).isoformat()
        and web[-1] > (T0 + timedelta(minutes=55)).isoformat()
    )
    reads = " ".join(q for q in statements if "FROM samples" in q)
    assert (
        "samples.prompt" in reads and "ingested_at" not in reads and "samples.source" not in reads
    )
    assert "samples.extra" not in reads

    with factory() as s:  # under the cap: every row, weights untouched
        same = fetch_window(s, T0, T0 + timedelta(hours=1), max_rows=1000)
    assert [(r["id"], r["sample_weight"]) for r in same] == [
        (r["id"], r["sample_weight"]) for r in full
    ]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    counts=st.dictionaries(st.text(max_size=3), st.integers(0, 500), min_size=1, max_size=8),
    max_rows=st.integers(1, 900),
    floor=st.integers(1, 100),
)
def test_quotas_fit_the_cap_and_keep_floors(counts, max_rows, floor):
    quotas = stratum_quotas(counts, max_rows, floor)
    total = sum(counts.values())
    assert sum(quotas.values()) == min(total, max_rows)
    effective_floor = min(floor, max_rows // len(counts))
    for seg, n in counts.items():
        assert min(n, effective_floor) <= quotas[seg] <= n
    if total > max_rows:  # a bigger segment never keeps fewer rows than a smaller one
        order = sorted(counts, key=counts.get)
        assert all(quotas[a] <= quotas[b] + 1 for a, b in zip(order, order[1:], strict=False))
