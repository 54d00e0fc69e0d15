"""Segment mixes of one hour's samples, shared by the capped-window tests (which rows a window
reads, which of them get vectors)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

T0 = datetime(2026, 11, 30, 10, tzinfo=UTC)
HOUR = timedelta(hours=1)
MODEL = "all-MiniLM-L6-v2"

mixes = st.dictionaries(
    st.sampled_from(["web", "api", "rare", "x/y", None]), st.integers(0, 90), min_size=1, max_size=5
)


def sample_id(tag: str, seg: str | None, i: int) -> str:
    return f"{tag}-{str(seg).replace('/', '.')}-{i}"


def hour_records(mix: dict[str | None, int], tag: str) -> list[dict]:
    """`n` samples per segment spread over the hour from T0, weights 1 to 3."""
    out = []
    for seg, n in mix.items():
        for i in range(n):
            rec = {
                "id": sample_id(tag, seg, i),
                "timestamp": (T0 + HOUR * (i + 0.5) / (n + 1)).isoformat(),
                "prompt": f"q {i}",
                "response": "a",
                "sample_weight": 1.0 + i % 3,
            }
            if seg is not None:
                rec["segment"] = seg
            out.append(rec)
    return out
