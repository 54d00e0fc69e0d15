"""The eval-score trend of the hourly report, one inline SVG per evaluator: the daily mean score
over the 7 days to the window's end (the eval trend's window, drift/detectors/eval_trend.py), that
7-day window's mean, the baseline's mean, and the level under which a significant drop is drift."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from dashboards.report.pictures import CUR, PAD, REF, H, Picture, W, svg_frame

DAYS = 7
DAY_S = 86_400.0
MAX_EVALUATORS = 8
DRIFT = "#d62728"


@dataclass
class EvalTrend:
    days: list[
        tuple[float | None, int]
    ]  # (mean, n) per day, oldest first; None for a day without scores
    window_mean: float | None  # over the 7 days
    baseline_mean: float | None
    drift_level: float | None  # the window mean under which a significant drop is drift


def epoch_seconds(values: pd.Series) -> np.ndarray:
    """Epoch seconds from epoch numbers or RFC 3339 text; NaN where unreadable."""
    numbers = pd.to_numeric(values, errors="coerce")
    text = values.where(numbers.isna())
    parsed = pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce")
    seconds = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    out = (
        numbers.astype(np.float64).where(numbers.abs() < 1e11).fillna(seconds)
    )  # 1e11 s: year 5138
    seconds_or_numbers: np.ndarray = out.to_numpy(dtype=np.float64, na_value=np.nan)
    return seconds_or_numbers


def _scores(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame.columns:
        return np.empty(0)
    scores: np.ndarray = pd.to_numeric(frame[column], errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan
    )
    return scores


def eval_trend(
    scores: np.ndarray,
    times: np.ndarray,
    end: float,
    baseline_mean: float | None,
    drop_threshold: float | None,
    days: int = DAYS,
) -> EvalTrend:
    """Daily means over the `days` days to `end` (day k holds (end-(days-k)d, end-(days-1-k)d]);
    a score without a readable time counts in the window mean only, as in
    drift.detectors.eval_trend."""
    ok = np.isfinite(scores)
    start = end - days * DAY_S
    inside = ok & (np.isnan(times) | ((times > start) & (times <= end)))
    with np.errstate(invalid="ignore"):
        slot = np.ceil((times - start) / DAY_S) - 1  # right-closed days; NaN for no time
    daily = [(_mean(scores[ok & (slot == k)]), int((ok & (slot == k)).sum())) for k in range(days)]
    level = None
    if baseline_mean is not None and drop_threshold is not None and math.isfinite(drop_threshold):
        level = baseline_mean - drop_threshold * abs(baseline_mean)
    return EvalTrend(daily, _mean(scores[inside]), baseline_mean, level)


def _mean(values: np.ndarray) -> float | None:
    """The mean, or None when there is none a float holds (no values, or an overflow)."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(values.mean()) if values.size else math.nan
    return mean if math.isfinite(mean) else None


def trend_svg(trend: EvalTrend, end: float) -> str | None:
    """Daily means as dots on a line, the 7-day mean solid, the baseline dashed, the drift level
    dotted; None when there is nothing to draw or no float axis spans the values."""
    levels = [
        v for v in (trend.window_mean, trend.baseline_mean, trend.drift_level) if v is not None
    ]
    values = [m for m, _ in trend.days if m is not None] + levels
    values = [v for v in values if math.isfinite(v)]
    if not any(m is not None for m, _ in trend.days):
        return None
    lo, hi = min(values), max(values)
    with np.errstate(over="ignore"):
        span = float(np.float64(hi) - np.float64(lo))
    if not math.isfinite(span):
        return None  # scores near ±1e308: the table still shows them
    margin = span * 0.08 if span > 0 else max(abs(lo) * 0.05, 0.5)
    lo, hi = lo - margin, hi + margin
    if not math.isfinite(hi - lo):
        return None
    n = len(trend.days)
    slot = (W - 2 * PAD) / n

    def y(v: float) -> float:
        return H - PAD - (v - lo) / (hi - lo) * (H - 2 * PAD)

    body = []
    for value, colour, cls, dash in (
        (trend.baseline_mean, REF, "baseline", "5 3"),
        (trend.drift_level, DRIFT, "drift-level", "1 3"),
        (trend.window_mean, CUR, "window-mean", None),
    ):
        if value is not None and math.isfinite(value):
            style = f' stroke-dasharray="{dash}"' if dash else ' stroke-width="1.5"'
            body.append(
                f'<line x1="{PAD}" x2="{W - PAD}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                f'stroke="{colour}"{style} class="{cls}"/>'
            )
    points = [
        (PAD + (k + 0.5) * slot, y(m), m, count, k)
        for k, (m, count) in enumerate(trend.days)
        if m is not None
    ]
    body.append(
        '<polyline points="'
        + " ".join(f"{px:.1f},{py:.1f}" for px, py, *_ in points)
        + f'" fill="none" stroke="{CUR}" stroke-opacity="0.5" class="daily"/>'
    )
    for px, py, mean, count, k in points:
        day = datetime.fromtimestamp(end - (n - 1 - k) * DAY_S, UTC)
        body.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{CUR}" class="day">'
            f"<title>day to {day:%m-%d %H:%M}: {mean:.4g} (n={count})</title></circle>"
        )
    first = datetime.fromtimestamp(end - (n - 1) * DAY_S, UTC)
    body.append(
        f'<text x="{PAD}" y="{PAD - 8}" font-size="10">{hi:.4g}</text>'
        f'<text x="{PAD}" y="{H - PAD + 12}" font-size="10">{lo:.4g}</text>'
        f'<text x="{PAD}" y="{H - 4}" font-size="10">{first:%m-%d}</text>'
        f'<text x="{W - PAD}" y="{H - 4}" font-size="10" text-anchor="end">'
        f"{datetime.fromtimestamp(end, UTC):%m-%d %H:%M}</text>"
    )
    return svg_frame(body, "eval score trend: daily means, 7-day mean, baseline")


def eval_trend_pictures(
    baseline: pd.DataFrame, scores: pd.DataFrame, results: list[dict[str, Any]], end: datetime
) -> list[Picture]:
    """One picture per evaluator holding a finite score in `scores` (eval_<name> columns and a
    timestamp); the drift level from the run's whole-window eval_trend result, when it has one."""
    names = sorted(c for c in scores.columns if isinstance(c, str) and c.startswith("eval_"))[
        :MAX_EVALUATORS
    ]
    times = (
        epoch_seconds(scores["timestamp"])
        if "timestamp" in scores.columns
        else np.full(len(scores), np.nan)
    )
    thresholds = {
        r.get("feature"): r.get("threshold")
        for r in results
        if r.get("test") == "eval_trend" and r.get("segment") == "*"
    }
    out = []
    for name in names:
        ref = _scores(baseline, name)
        threshold = thresholds.get(name)
        trend = eval_trend(
            _scores(scores, name),
            times,
            end.timestamp(),
            _mean(ref[np.isfinite(ref)]),
            float(threshold) if isinstance(threshold, int | float) else None,
        )
        svg = trend_svg(trend, end.timestamp())
        if svg is not None:
            out.append(
                Picture(f"{name.removeprefix('eval_')}: daily mean score, last {DAYS} days", svg)
            )
    return out
