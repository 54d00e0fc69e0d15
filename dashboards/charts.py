"""Chart data for the dashboard: query rows in, uPlot-ready JSON out (aligned x and y arrays).

Every chart is {"id", "title", "unit", "x": [unix seconds], "series": [{"label", "values"}],
"runs": [run id or None per x]} — `runs` is what a click on a point opens. Drift charts also
carry "threshold" (one value per x) and "direction". Every chart has one x per time bucket
(BUCKETS), so its size is bounded whatever the number of runs or samples in the range.
"""

from __future__ import annotations

import bisect
import functools
import math
import threading
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from storage.repositories.series import ResultPoint, RunPoint
from storage.repositories.series_buckets import BucketResult, TrafficBuckets

RANGES = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
BUCKETS = {"24h": 3600, "7d": 3600, "30d": 6 * 3600}  # at most 169 points per series
MAX_DRIFT_CHARTS = 24
MAX_SEGMENTS_PER_CHART = 8
P_FLOOR = 1e-300


@functools.cache
def direction_of(test: str) -> str:
    """How a test's threshold reads: "statistic" (drift above) or "p_value" (drift at or below)."""
    from drift.registry import get_test

    try:
        return get_test(test).direction
    except KeyError:
        return "statistic"


@functools.cache
def p_value_tests() -> tuple[str, ...]:
    """The registered tests read by p-value (drift at or below): their worst is the lowest."""
    from drift.registry import all_tests

    return tuple(sorted(spec.name for spec in all_tests() if spec.direction == "p_value"))


def warm_registry() -> threading.Thread:
    """Import drift's test registry off the request path: it pulls in torch (seconds), and the
    first chart request after a restart should not wait for it."""
    thread = threading.Thread(target=p_value_tests, name="vigil-warm-drift-registry", daemon=True)
    thread.start()
    return thread


def drift_score(point: ResultPoint, direction: str) -> float | None:
    """Higher is worse on every chart: the statistic, or -log10(p) for p-value tests."""
    if direction == "p_value":
        return None if point.p_value is None else -math.log10(max(point.p_value, P_FLOOR))
    return point.statistic


def score_threshold(threshold: float | None, direction: str) -> float | None:
    if threshold is None:
        return None
    if direction == "p_value":
        return -math.log10(max(threshold, P_FLOOR)) if threshold > 0 else None
    return threshold


def _finite(value: float | None) -> float | None:
    """A chart value: finite, and 5 significant digits (a 30-day chart holds many points)."""
    return float(f"{value:.5g}") if value is not None and math.isfinite(value) else None


def _worst_run(points: list[tuple[Any, ...]]) -> int | None:
    """The run a click opens: of the (score, limit, run) points shown at one x, the one furthest
    over its threshold (the first when none has a ratio)."""
    best, best_ratio = None, -math.inf
    for score, limit, run_id in points:
        ratio = score / limit if score is not None and limit else -math.inf
        if best is None or ratio > best_ratio:
            best, best_ratio = run_id, ratio
    return best


# (test, feature) -> segment -> bucket -> (score, score-scale threshold, run id)
_Groups = dict[tuple[str, str], dict[str, dict[int, tuple[Any, ...]]]]


def _grouped(results: Sequence[BucketResult]) -> tuple[_Groups, set[tuple[str, str]]]:
    """Each point scored once, by (test, feature), segment and bucket; and which pairs drifted."""
    groups: _Groups = defaultdict(lambda: defaultdict(dict))
    drifted: set[tuple[str, str]] = set()
    for point in results:
        key = (point.test, point.feature)
        direction = direction_of(point.test)
        groups[key][point.segment][point.bucket] = (
            drift_score(point, direction),
            score_threshold(point.threshold, direction),
            point.run_id,
        )
        if point.drifted:
            drifted.add(key)
    return groups, drifted


def _ranked(groups: _Groups, drifted: set[tuple[str, str]]) -> list[tuple[Any, ...]]:
    """(not drifted, -worst ratio, chart id, key, worst ratio per segment), worst first."""
    ranked = []
    for key, by_segment in groups.items():
        worst = {
            segment: max(
                (
                    score / limit
                    for score, limit, _ in points.values()
                    if score is not None and limit
                ),
                default=0.0,
            )
            for segment, points in by_segment.items()
        }
        ranked.append(
            (
                key not in drifted,
                -max(worst.values(), default=0.0),
                f"{key[0]}:{key[1]}",
                key,
                worst,
            )
        )
    ranked.sort(key=lambda r: r[:3])
    return ranked


def drift_charts(
    results: Sequence[BucketResult],
    origin: float,
    bucket_s: int,
    max_charts: int = MAX_DRIFT_CHARTS,
) -> list[dict[str, Any]]:
    """One chart per (test, feature): a line per segment and the calibrated threshold, ordered
    worst first (drifted, then highest score / threshold anywhere in the range). One x per time
    bucket that has runs; each value is the worst run of its bucket
    (see worst_results_per_bucket)."""
    groups, drifted = _grouped(results)
    charts = []
    for _, neg_worst, chart_id, (test, feature), worst in _ranked(groups, drifted)[:max_charts]:
        by_segment = groups[(test, feature)]
        direction = direction_of(test)
        buckets = sorted({b for seg in by_segment.values() for b in seg})
        # "*" (all traffic) first, then the segments that moved most
        segments = sorted(by_segment, key=lambda s: (s != "*", -worst[s], s))[
            :MAX_SEGMENTS_PER_CHART
        ]
        series = [
            {
                "label": segment if segment != "*" else "all",
                "values": [
                    _finite(by_segment[segment][b][0]) if b in by_segment[segment] else None
                    for b in buckets
                ],
            }
            for segment in segments
        ]
        threshold, runs = [], []
        for b in buckets:
            shown = [by_segment[s][b] for s in segments if b in by_segment[s]]
            threshold.append(_finite(shown[0][1]) if shown else None)
            runs.append(_worst_run(shown))
        charts.append(
            {
                "id": chart_id,
                "title": f"{test} · {feature}",
                "direction": direction,
                "unit": "-log10 p" if direction == "p_value" else "statistic",
                "x": [origin + b * bucket_s for b in buckets],
                "runs": runs,
                "series": series,
                "threshold": threshold,
                "drifted": (test, feature) in drifted,
                "worst": round(-neg_worst, 6),
            }
        )
    return charts


def bucket_edges(start: datetime, end: datetime, bucket_s: int) -> np.ndarray:
    """Bucket starts (unix seconds) aligned to multiples of bucket_s, covering [start, end)."""
    first = math.floor(start.timestamp() / bucket_s) * bucket_s
    return np.arange(first, end.timestamp(), bucket_s, dtype=np.float64)


def run_for_buckets(edges: np.ndarray, runs: Sequence[RunPoint]) -> list[int | None]:
    """For each bucket start, the run whose window contains it (the latest such), else None."""
    ordered = sorted(runs, key=lambda r: (r.window_start, r.window_end))
    starts = [r.window_start.timestamp() for r in ordered]
    longest = max(
        (r.window_end.timestamp() - r.window_start.timestamp() for r in ordered), default=0.0
    )
    out: list[int | None] = []
    for t in edges:
        match, best_end = None, None
        i = bisect.bisect_right(starts, t) - 1
        while i >= 0 and starts[i] > t - longest - 1:  # only windows that can still cover t
            end = ordered[i].window_end.timestamp()
            if t < end and (best_end is None or end > best_end):
                match, best_end = ordered[i].run_id, end
            i -= 1
        out.append(match)
    return out


def eval_chart(
    rows: Sequence[tuple[int, str, float, int]], edges: np.ndarray, runs: Sequence[RunPoint]
) -> dict[str, Any]:
    """Mean score per evaluator per bucket, from (bucket, evaluator, mean, count) rows."""
    by_name: dict[str, list[float | None]] = {}
    for bucket, name, mean, _count in rows:
        values = by_name.setdefault(name, [None] * len(edges))
        if 0 <= bucket < len(edges):
            values[bucket] = float(f"{mean:.5g}")
    series = [{"label": name, "values": by_name[name]} for name in sorted(by_name)]
    return {
        "id": "eval",
        "title": "Eval score (mean per bucket)",
        "unit": "score",
        "x": edges.tolist(),
        "runs": run_for_buckets(edges, runs),
        "series": series,
    }


def _values(array: np.ndarray, digits: int) -> list[float | None]:
    return [None if not math.isfinite(v) else round(float(v), digits) for v in array]


def traffic_charts(
    stats: TrafficBuckets, edges: np.ndarray, runs: Sequence[RunPoint]
) -> list[dict[str, Any]]:
    """Logged samples per bucket (and the weighted estimate), and p50/p95 of TTFT, TPOT and
    end-to-end latency per bucket."""
    links = run_for_buckets(edges, runs)
    x = edges.tolist()
    volume = {
        "id": "traffic",
        "title": "Traffic (logged samples per bucket)",
        "unit": "samples",
        "x": x,
        "runs": links,
        "series": [
            {"label": "logged", "values": stats.count.astype(float).tolist()},
            {"label": "weighted", "values": stats.weighted.round(3).tolist()},
        ],
    }
    charts = [volume]
    for metric, key, title in (
        ("ttft_ms", "ttft", "Time to first token"),
        ("tpot_ms", "tpot", "Time per output token"),
        ("latency_ms", "latency", "End-to-end latency"),
    ):
        p50, p95 = stats.quantiles[metric]
        charts.append(
            {
                "id": key,
                "title": title,
                "unit": "ms",
                "x": x,
                "runs": links,
                "series": [
                    {"label": "p50", "values": _values(p50, 3)},
                    {"label": "p95", "values": _values(p95, 3)},
                ],
            }
        )
    return charts
