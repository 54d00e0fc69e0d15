"""The report's eval-score trend picture: daily means checked against a pandas recount, drawn
with data, absent without, NaN/None scores skipped, one point drawn alone, well-formed SVG for
any outside values, and inline in the written report."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_args import report_args

import dashboards.report.build as build
from dashboards.report.eval_picture import DAY_S, epoch_seconds, eval_trend, eval_trend_pictures

SVG = "{http://www.w3.org/2000/svg}"
END = datetime(2026, 11, 29, 11, tzinfo=UTC)
TREND = [
    {
        "test": "eval_trend",
        "feature": "eval_judge",
        "segment": "*",
        "statistic": 0.1,
        "p_value": 0.001,
        "threshold": 0.05,
        "drifted": True,
        "insufficient": False,
        "detail": {},
    }
]


def scores(rows: list[tuple[float, float | None]]) -> pd.DataFrame:
    """(hours before END, score) rows as the drift job's eval frame holds them."""
    return pd.DataFrame(
        {
            "timestamp": [END.timestamp() - h * 3600 for h, _ in rows],
            "eval_judge": [s for _, s in rows],
        }
    )


def circles(svg: str) -> list[ET.Element]:
    return [c for c in ET.fromstring(svg).iter(f"{SVG}circle") if c.get("class") == "day"]


def line_y(svg: str, cls: str) -> float:
    [line] = [e for e in ET.fromstring(svg).iter(f"{SVG}line") if e.get("class") == cls]
    return float(line.get("y1"))


def test_a_falling_week_is_drawn_with_its_levels():
    rng = np.random.default_rng(0)
    rows = [(h, float(s)) for h in range(0, 7 * 24, 3) for s in rng.normal(3.5 + h / 100, 0.05, 1)]
    baseline = pd.DataFrame({"eval_judge": rng.normal(4.3, 0.1, 50)})
    [picture] = eval_trend_pictures(baseline, scores(rows), TREND, END)
    assert picture.title.startswith("judge")
    dots = circles(picture.svg)
    assert len(dots) == 7
    xs, ys = [float(c.get("cx")) for c in dots], [float(c.get("cy")) for c in dots]
    assert xs == sorted(xs) and ys == sorted(ys)  # oldest first; each day lower (SVG y points down)
    # the drift level 5 % under the baseline (4.3 -> 4.085), where the days cross it; the 7-day
    # mean between them
    assert line_y(picture.svg, "baseline") < line_y(picture.svg, "drift-level")
    assert min(ys) < line_y(picture.svg, "drift-level") < max(ys)
    assert min(ys) < line_y(picture.svg, "window-mean") < max(ys)


def test_no_scores_no_picture_and_the_report_says_so(tmp_path):
    assert eval_trend_pictures(pd.DataFrame(), scores([]), [], END) == []
    assert eval_trend_pictures(pd.DataFrame(), scores([(1, None), (2, math.nan)]), [], END) == []
    window = pd.DataFrame({"timestamp": [END.isoformat()], "prompt": ["q"]})
    path = build.write_run_report(
        **report_args(tmp_path, window, None, window=(END - timedelta(hours=1), END), now=END)
    )
    text = path.read_text()
    assert "No eval scores in this window." in text and "vigil-eval-pictures" not in text


def test_nan_and_none_scores_are_skipped_and_one_point_is_drawn_alone():
    [picture] = eval_trend_pictures(
        pd.DataFrame(), scores([(2, None), (3, math.nan), (5, 4.0)]), [], END
    )
    [dot] = circles(picture.svg)
    assert "4 (n=1)" in dot.find(f"{SVG}title").text
    assert [e.get("class") for e in ET.fromstring(picture.svg).iter(f"{SVG}line")] == [
        "window-mean"
    ]


TIMES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**12), 10**12),
    st.sampled_from(["", "yesterday", "2026-11-28T10:00:00Z", "2026-11-29T10:59:59+01:00"]),
    st.none(),
)
SCORES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.integers(-(10**6), 10**6),
    st.sampled_from(["4", "x", ""]),
)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(
    rows=st.lists(st.tuples(TIMES, SCORES), max_size=30),
    baseline=st.lists(st.one_of(st.floats(), st.none()), max_size=10),
    threshold=st.one_of(st.none(), st.floats()),
)
def test_any_outside_values_give_well_formed_svg(rows, baseline, threshold):
    frame = pd.DataFrame(
        {
            "timestamp": pd.Series([t for t, _ in rows], dtype=object),
            "eval_judge": pd.Series([s for _, s in rows], dtype=object),
        }
    )
    results = [{**TREND[0], "threshold": threshold}]
    pictures = eval_trend_pictures(
        pd.DataFrame({"eval_judge": pd.Series(baseline, dtype=object)}), frame, results, END
    )
    for picture in pictures:
        root = ET.fromstring(picture.svg)
        assert not re.search(r"nan|inf", picture.svg.split("<title>")[0], re.I)
        for circle in root.iter(f"{SVG}circle"):
            assert 0 <= float(circle.get("cx")) <= 360 and 0 <= float(circle.get("cy")) <= 160


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(
                st.integers(-2 * 86_400, 9 * 86_400),  # whole seconds before END
                st.sampled_from([0, 86_400, 6 * 86_400, 7 * 86_400]),
            ),
            st.one_of(st.none(), st.floats(0, 5)),
        ),
        max_size=40,
    )
)
def test_daily_means_match_a_pandas_recount(rows):
    end = END.timestamp()
    times = np.array([end - offset for offset, _ in rows])
    values = np.array([np.nan if s is None else s for _, s in rows], dtype=np.float64)
    trend = eval_trend(values, times, end, baseline_mean=None, drop_threshold=None)
    frame = pd.DataFrame({"t": times, "v": values}).dropna()
    frame = frame[(frame.t > end - 7 * DAY_S) & (frame.t <= end)]
    frame["day"] = 6 - ((end - frame.t) // DAY_S).astype(int)  # day 6 is (end - 1 day, end]
    for k, (mean, n) in enumerate(trend.days):
        chosen = frame.v[frame.day == k]
        assert n == len(chosen)
        assert mean == (pytest.approx(chosen.mean()) if len(chosen) else None)
    assert trend.window_mean == (pytest.approx(frame.v.mean()) if len(frame) else None)


def test_times_as_numbers_or_rfc3339():
    got = epoch_seconds(
        pd.Series(
            [1764414000.5, "2026-11-29T11:00:00Z", "2026-11-29T12:00:00+01:00", "x", None],
            dtype=object,
        )
    )
    assert got[:3].tolist() == [1764414000.5, END.timestamp(), END.timestamp()]
    assert np.isnan(got[3:]).all()


def test_the_report_carries_the_trend_inline(tmp_path):
    window = pd.DataFrame({"timestamp": [END.isoformat()], "prompt": ["q"], "eval_judge": [4.0]})
    week = scores([(h, 4.0 - (h % 5) / 10) for h in range(0, 7 * 24, 5)])
    path = build.write_run_report(
        **report_args(
            tmp_path, window, pd.DataFrame({"eval_judge": [4.2, 4.4]}), run_id=2,
            window=(END - timedelta(hours=1), END), now=END, results=TREND, eval_frame=week,
        )
    )  # fmt: skip
    section = path.read_text().split("<h2>Eval score trend</h2>")[1].split("<h2>")[0]
    assert section.count("<svg") == 1 and section.count('class="day"') == 7
    assert not re.search(r"""(src|href)=["']https?://""", section)  # self-contained: opens offline
