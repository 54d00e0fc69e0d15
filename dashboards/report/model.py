"""What a drift report shows, as typed values (built by the drift job, rendered by render.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

MAX_EXAMPLES = 5
MAX_EXAMPLE_CHARS = 200  # a report is shared widely: a few short examples, never raw data


def truncate(text: str | None, limit: int = MAX_EXAMPLE_CHARS) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class ClusterView:
    label: str
    segment: str
    size: int
    share: float | None
    examples: list[str]


@dataclass
class EvalTrendRow:
    name: str
    baseline_mean: float | None
    current_mean: float | None
    n_current: int
    hourly: list[tuple[str, float, int]]  # (hour label, mean, n)


@dataclass
class SegmentRow:
    segment: str
    n_samples: int
    n_tests: int
    n_drifted: int
    n_insufficient: int
    drifted: list[str]  # "test:feature"
    new: bool = False  # in the window, not in the baseline: a new tenant or segment


@dataclass
class AlertView:
    id: int
    rule: str
    severity: str
    segment: str
    summary: str
    url: str


@dataclass
class ReportContext:
    run_id: int
    window_start: datetime
    window_end: datetime
    generated_at: datetime
    num_samples: int
    baseline: dict[str, Any] | None  # id, name, window, num_samples
    results: list[dict[str, Any]]  # TestResult.to_dict() shape
    segments: list[SegmentRow] = field(default_factory=list)
    clusters: list[ClusterView] = field(default_factory=list)
    eval_trend: list[EvalTrendRow] = field(default_factory=list)
    alerts: list[AlertView] = field(default_factory=list)
    public_url: str = ""
    note: str | None = None  # e.g. "no active baseline"
    pictures: list[Any] = field(default_factory=list)  # report.pictures.Picture: inline SVGs
    eval_pictures: list[Any] = field(
        default_factory=list
    )  # the eval-score trend, one per evaluator
    incident: dict[str, Any] | None = None  # id, headline, url: what the report leads with
    unsent: list[str] = field(
        default_factory=list
    )  # "field (its tests)" the window has no value of


# what a source may not send (OTLP spans, vLLM's spans, the proxy without client logprobs), and
# the tests that then have nothing to judge
SENT_BY_SOME = (
    ("prompt", "prompt embedding, clusters, evals"),
    ("response", "response embedding, evals"),
    ("ttft_ms", "TTFT"),
    ("mean_logprob", "log-probability"),
    ("mean_entropy", "entropy"),
)


def unsent_fields(frame: Any) -> list[str]:
    """The SENT_BY_SOME fields with no value in any sample of `frame` (a DataFrame)."""
    if frame is None or not len(frame):
        return []
    out = []
    for column, tests in SENT_BY_SOME:
        values = frame.get(column)
        empty = (
            values is None or not values.map(lambda v: v is not None and v == v and v != "").any()
        )
        if empty:
            out.append(f"{column} ({tests})")
    return out


def segment_rows(
    results: list[dict[str, Any]], counts: dict[str, int], new_segments: Iterable[str] = ()
) -> list[SegmentRow]:
    """The per-segment table: tests run, drifted, and which ones, per segment; `new_segments`
    (labels with window rows and no baseline rows) read as new, not as "too little data"."""
    by: dict[str, SegmentRow] = {}
    for r in results:
        seg = r.get("segment") or "*"
        row = by.setdefault(seg, SegmentRow(seg, counts.get(seg, 0), 0, 0, 0, []))
        row.n_tests += 1
        row.n_insufficient += bool(r.get("insufficient"))
        if r.get("drifted"):
            row.n_drifted += 1
            row.drifted.append(f"{r.get('test')}:{r.get('feature')}")
    for seg, n in counts.items():
        by.setdefault(seg, SegmentRow(seg, n, 0, 0, 0, []))
    for seg in new_segments or ():
        if seg in by:
            by[seg].new = True
    return sorted(by.values(), key=lambda s: (s.segment != "*", s.segment))
