"""How much of a drift window had vectors when it ran, in words for the report, the run summary
and the alerts it raised. The embed job serves the rows a window reads first, but a backlog
can leave some without vectors: the embedding tests then run on the rows that have them, the
other tests on every row, and the reader is told so."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import pandas as pd

FIELDS = ("prompt_embedding", "response_embedding")


@dataclass(frozen=True)
class Coverage:
    rows: int  # the read rows with text whose vectors the embedding tests read
    embedded: int  # of which rows with a vector
    window_rows: int = 0  # rows the window read, when the vectors were read for a subset only

    @property
    def share(self) -> float:
        return self.embedded / self.rows if self.rows else 1.0

    @property
    def partial(self) -> bool:
        return self.embedded < self.rows

    def _whose(self) -> str:
        if self.window_rows > self.rows:
            return f"the {self.rows:,} rows sampled for it from the window's {self.window_rows:,}"
        return f"the window's {self.rows:,} rows"

    def sentence(self) -> str | None:
        """None when every row had its vectors."""
        if not self.partial:
            return None
        if self.embedded == 0:
            return (
                f"drift on embeddings not computed: none of {self._whose()} had vectors yet; "
                "the other tests used every row"
            )
        percent = int(100 * self.share)  # rounded down: 99.6 % is not "100 %"
        of = (
            f"of {self._whose()} ({self.embedded:,} of them)"
            if self.window_rows > self.rows
            else f"of the window's rows ({self.embedded:,} of {self.rows:,})"
        )
        return (
            f"drift on embeddings computed on {percent} % {of}; the rest had no vectors yet; "
            "the other tests used every row"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "embedded": self.embedded,
            "share": round(self.share, 4),
            "window_rows": self.window_rows or self.rows,
            "sentence": self.sentence(),
        }


def vector_coverage(frame: pd.DataFrame, among: Collection[str] | None = None) -> Coverage:
    """Rows of `frame` (the window as read) with prompt or response text, and how many of them
    carry at least one of the sidecar's vectors; `among`: only the rows with these ids count
    (the subset whose vectors the embedding tests read; None: every row)."""
    window_rows = 0
    if among is not None and len(frame):
        window_rows = len(frame)
        frame = frame[frame["id"].isin(among)]
    if not len(frame):
        return Coverage(0, 0, window_rows)
    has_text = pd.Series(False, index=frame.index)
    for column in ("prompt", "response"):
        if column in frame:
            has_text |= frame[column].notna()
    has_vector = pd.Series(False, index=frame.index)
    for column in FIELDS:
        if column in frame:
            has_vector |= frame[column].map(lambda v: v is not None and not _is_nan(v))
    return Coverage(int(has_text.sum()), int((has_text & has_vector).sum()), window_rows)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value
