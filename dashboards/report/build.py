"""Build a report's sections from a drift run's inputs and outputs, then render and write it."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dashboards.report.eval_picture import eval_trend_pictures
from dashboards.report.evidently_part import EvidentlyPart, evidently_html, numeric_frame
from dashboards.report.model import (
    MAX_EXAMPLES,
    AlertView,
    ClusterView,
    EvalTrendRow,
    ReportContext,
    segment_rows,
    truncate,
    unsent_fields,
)
from dashboards.report.ordering import by_severity, moved_first, new_segments
from dashboards.report.pictures import report_pictures
from dashboards.report.preamble import shared_preambles, strip_preamble
from dashboards.report.render import MAX_REPORT_BYTES, render_report, write_report
from drift.formatting import clean_text
from storage.types import to_utc

log = logging.getLogger("vigil.sidecar.report")


def _rows_of_segment(frame: pd.DataFrame, label: str) -> np.ndarray:
    """Frame row indices of a segment label ("*" or "key=value"), as drift.features.segments
    selects them."""
    if label == "*":
        return np.arange(len(frame))
    key, _, value = label.partition("=")
    if key not in frame.columns:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(
        frame[key].astype(object).map(lambda v: None if pd.isna(v) else clean_text(v)) == value
    )


def _example(row: pd.Series, field: str, preambles: list[str]) -> str:
    """The example prompt after its shared preamble; for a response cluster also the
    (truncated) response."""
    text = row.get("prompt")
    prompt = truncate(strip_preamble(text if isinstance(text, str) else "", preambles), 160)
    if field.startswith("response"):
        return f"{prompt} → {truncate(row.get('response'), 160)}"
    return prompt


def cluster_views(results: list[dict[str, Any]], frame: pd.DataFrame) -> list[ClusterView]:
    """New clusters with a few (truncated) example prompts, shown after the window's shared
    preambles (dashboards/report/preamble.py).

    `representatives` index the embedded rows of the segment's window (drift.detectors.clusters), in
    row order; map them back to frame rows the same way to fetch the prompts."""
    views = []
    preambles: list[str] | None = None
    for r in results:
        if r["test"] != "new_cluster" or not r["drifted"]:
            continue
        if preambles is None:
            preambles = shared_preambles(frame["prompt"]) if "prompt" in frame.columns else []
        field = r["feature"]
        seg_rows = _rows_of_segment(frame, r["segment"])
        if field in frame.columns:
            embedded = [i for i in seg_rows if isinstance(frame[field].iloc[i], np.ndarray | list)]
        else:
            embedded = []
        for k, c in enumerate((r.get("detail") or {}).get("clusters") or []):
            examples = []
            for rep in (c.get("representatives") or [])[:MAX_EXAMPLES]:
                if isinstance(rep, int) and 0 <= rep < len(embedded):
                    examples.append(_example(frame.iloc[embedded[rep]], field, preambles))
            views.append(ClusterView(f"{field} group {k + 1}", r["segment"],
                                     int(c.get("size") or 0),
                                     c.get("share"), examples))  # fmt: skip
    return views


def _hours(ts: pd.Series) -> pd.Series:
    """The hour of each timestamp (RFC 3339 text or epoch seconds); NaT where unreadable."""
    numbers = pd.to_numeric(ts, errors="coerce")
    parsed = pd.to_datetime(ts.where(numbers.isna()), utc=True, format="ISO8601", errors="coerce")
    epoch = pd.to_datetime(numbers.where(numbers.abs() < 1e11), unit="s", utc=True, errors="coerce")
    return parsed.fillna(epoch).dt.floor("h")


def eval_trend_rows(baseline_frame: pd.DataFrame, frame: pd.DataFrame) -> list[EvalTrendRow]:
    names = sorted(c for c in frame.columns if isinstance(c, str) and c.startswith("eval_"))
    rows = []
    for name in names:
        cur = pd.to_numeric(frame[name], errors="coerce")
        ref = (
            pd.to_numeric(baseline_frame[name], errors="coerce") if name in baseline_frame else None
        )
        hours = (
            _hours(frame["timestamp"])
            if "timestamp" in frame
            else pd.Series(pd.NaT, index=frame.index)
        )
        hourly = [
            (h.strftime("%m-%d %H:00"), float(g.mean()), int(g.count()))
            for h, g in cur.groupby(hours) if g.count()
        ]  # fmt: skip
        rows.append(EvalTrendRow(
            name=name.removeprefix("eval_"),
            baseline_mean=None if ref is None or not ref.notna().any() else float(ref.mean()),
            current_mean=float(cur.mean()) if cur.notna().any() else None,
            n_current=int(cur.notna().sum()), hourly=hourly,
        ))  # fmt: skip
    return rows


def evidently_part(
    frame: pd.DataFrame, baseline_frame: pd.DataFrame | None, *, max_rows: int, seed: int
) -> EvidentlyPart:
    """Evidently's page and what its verdict counted, or why not. Slow (seconds): the drift job
    calls it before its final transaction, so no lock is held while it renders."""
    base_frame = baseline_frame if baseline_frame is not None else pd.DataFrame()
    if not len(base_frame):
        return EvidentlyPart(None, "no baseline to compare with")
    if not len(frame):
        return EvidentlyPart(None, "the window holds no samples")
    evals = tuple(sorted(
        {c for c in frame.columns if str(c).startswith("eval_")}
        & {c for c in base_frame.columns if str(c).startswith("eval_")}))  # fmt: skip
    try:
        return evidently_html(
            numeric_frame(base_frame.to_dict("records"), evals),
            numeric_frame(frame.to_dict("records"), evals),
            max_rows=max_rows, seed=seed,
        )  # fmt: skip
    except Exception as exc:  # the report must not be lost to a plotting failure
        log.exception("Evidently section failed")
        return EvidentlyPart(None, f"Evidently failed: {exc.__class__.__name__}: {exc}"[:300])


def write_run_report(
    *,
    run_id: int,
    window: tuple[datetime, datetime],
    now: datetime,
    frame: pd.DataFrame,
    baseline_row: Any | None,
    baseline_frame: pd.DataFrame | None,
    results: list[dict[str, Any]],
    segment_sizes: dict[str, dict[str, int]],
    alerts: list[Any],
    report_dir: Path,
    public_url: str,
    evidently: EvidentlyPart | tuple[str | None, str | None],
    note: str | None = None,
    eval_frame: pd.DataFrame | None = None,
    incident: dict[str, Any] | None = None,
) -> Path:
    """Render the run's report (Vigil's sections on top of `evidently_part`'s page) and write
    it; returns the path. `eval_frame`: the trailing days of eval scores the eval trend tested
    (the drift job's), drawn as the trend; without it, the window's own scores are drawn.
    `incident` (id, headline, url): the run's incident, whose headline the report leads with."""
    base_frame = baseline_frame if baseline_frame is not None else pd.DataFrame()
    scores = eval_frame if eval_frame is not None and len(eval_frame) else frame
    counts = {label: s.get("n_current", 0) for label, s in segment_sizes.items()}
    counts.setdefault("*", len(frame))
    ctx = ReportContext(
        run_id=run_id, window_start=to_utc(window[0]), window_end=to_utc(window[1]),
        generated_at=to_utc(now), num_samples=len(frame),
        baseline=None if baseline_row is None else {
            "id": baseline_row.id, "name": baseline_row.name,
            "num_samples": baseline_row.num_samples,
            "window_start": f"{baseline_row.window_start:%Y-%m-%d %H:%M}",
            "window_end": f"{baseline_row.window_end:%Y-%m-%d %H:%M}"},
        results=moved_first(results), segments=segment_rows(results, counts, new_segments(
            segment_sizes)),
        clusters=cluster_views(results, frame) if len(frame) else [],
        eval_trend=eval_trend_rows(base_frame, frame) if len(frame) else [],
        alerts=[AlertView(a.id, a.rule, a.severity, a.segment, a.summary,
                          f"{public_url.rstrip('/')}/alerts/{a.id}") for a in by_severity(alerts)],
        public_url=public_url, note=note,
        pictures=report_pictures(results, base_frame, frame) if len(frame) else [],
        eval_pictures=eval_trend_pictures(base_frame, scores, results, to_utc(window[1])),
        incident=incident, unsent=unsent_fields(frame),
    )  # fmt: skip
    html, why, verdict, legend = EvidentlyPart(*evidently)
    if html is not None and len(html.encode("utf-8")) > MAX_REPORT_BYTES:
        # many features make Evidently's page grow: keep the bound, keep Vigil's sections
        size_mb = len(html.encode("utf-8")) / 2**20
        html, why = None, (f"Evidently's page left out: it would be {size_mb:.1f} MB, over the "
                           f"{MAX_REPORT_BYTES / 2**20:.1f} MB bound")  # fmt: skip
    page = render_report(ctx, why, verdict, with_evidently=html is not None, legend=legend)
    return write_report(report_dir, run_id, page, html)


def segment_counts(frame: pd.DataFrame, keys: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Window sizes per segment label when no drift ran (no baseline)."""
    sizes: dict[str, dict[str, int]] = defaultdict(dict)
    sizes["*"] = {"n_current": len(frame), "n_reference": 0}
    for key in keys:
        if key in frame.columns:
            for value, n in frame[key].dropna().astype(str).value_counts().items():
                sizes[f"{key}={value}"] = {"n_current": int(n), "n_reference": 0}
    return dict(sizes)
