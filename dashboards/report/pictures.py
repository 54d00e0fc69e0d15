"""Pictures for the hourly report, as inline SVG (the file stays self-contained): per drifted
numeric feature, reference vs window as a histogram (shared bins, densities) and as ECDFs; the
prompt embeddings projected to 2-D (baseline grey, window blue)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dashboards.projection import pca_2d, subsample, svg_scatter

MAX_FEATURES = 8
OUTLIER_QUANTILE = 0.01  # histograms and ECDFs span the 1st-99th percentile
BINS = 20
W, H, PAD = 360, 160, 24
REF, CUR = "#9e9e9e", "#1f77b4"


@dataclass
class Picture:
    title: str
    svg: str  # built from numbers only: safe to embed unescaped


def _numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame.columns:
        return np.empty(0)
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    finite: np.ndarray = values[np.isfinite(values)]
    return finite


def svg_frame(body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        f'role="img" aria-label="{label}">'
        f'<rect width="{W}" height="{H}" fill="#fff" stroke="#ddd"/>' + "".join(body) + "</svg>"
    )


def bin_edges(values: np.ndarray, bins: int = BINS) -> np.ndarray:
    """`bins` + 1 increasing edges over finite `values`. A range too narrow for floats to split
    into `bins` (equal values, or values an ulp or so apart, as rounded timings often are) gets
    edges centred on it instead of numpy's "Too many bins for data range" error."""
    lo, hi = float(values.min()), float(values.max())
    edges = np.linspace(lo, hi, bins + 1)
    if not np.all(np.diff(edges) > 0):
        pad = max(0.5, abs(lo) * 1e-6)
        edges = np.linspace(lo - pad, hi + pad, bins + 1)
    return edges


def histogram_svg(ref: np.ndarray, cur: np.ndarray, bins: int = BINS) -> str:
    """Side-by-side density bars per shared bin: reference grey, window blue."""
    edges = bin_edges(np.concatenate([ref, cur]), bins)
    dens = [np.histogram(x, bins=edges)[0] / max(len(x), 1) for x in (ref, cur)]
    top = max(float(max(d.max() for d in dens)), 1e-12)
    slot = (W - 2 * PAD) / bins
    body = []
    for i in range(bins):
        for k, (d, colour) in enumerate(zip(dens, (REF, CUR), strict=True)):
            h = d[i] / top * (H - 2 * PAD)
            x = PAD + i * slot + k * slot / 2
            body.append(
                f'<rect x="{x:.1f}" y="{H - PAD - h:.1f}" width="{slot / 2:.1f}" height="{h:.1f}" '
                f'fill="{colour}" class="bar{k}"/>'
            )
    body.append(
        f'<text x="{PAD}" y="{H - 6}" font-size="10">{edges[0]:.4g}</text>'
        f'<text x="{W - PAD}" y="{H - 6}" font-size="10" text-anchor="end">{edges[-1]:.4g}</text>'
    )
    return svg_frame(body, "histogram, reference vs window")


def ecdf_svg(ref: np.ndarray, cur: np.ndarray) -> str:
    """Both empirical CDFs as step lines on a shared x axis."""
    lo, hi = float(min(ref.min(), cur.min())), float(max(ref.max(), cur.max()))
    span = hi - lo if hi > lo else 1.0
    body = []
    for k, (x, colour) in enumerate(((ref, REF), (cur, CUR))):
        xs = np.sort(x)
        ys = np.arange(1, len(xs) + 1) / len(xs)
        pick = subsample(xs, 400)  # a step line needs no more points than pixels
        pts = " ".join(
            f"{PAD + (xs[i] - lo) / span * (W - 2 * PAD):.1f},{H - PAD - ys[i] * (H - 2 * PAD):.1f}"
            for i in pick
        )
        body.append(
            f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5" '
            f'class="ecdf{k}"/>'
        )
    return svg_frame(body, "ECDF, reference vs window")


def within_quantiles(
    ref: np.ndarray, cur: np.ndarray, q: float = OUTLIER_QUANTILE
) -> tuple[np.ndarray, np.ndarray, int]:
    """Both sides clipped to the q-th and (1-q)-th quantiles of their union, so a few extreme
    values do not squash the bulk into one bin; (ref, cur, how many values were clipped)."""
    both = np.concatenate([ref, cur])
    lo, hi = np.quantile(both, [q, 1.0 - q])
    if not hi > lo:
        return ref, cur, 0
    beyond = int(((both < lo) | (both > hi)).sum())
    return np.clip(ref, lo, hi), np.clip(cur, lo, hi), beyond


def feature_pictures(
    results: list[dict[str, Any]], baseline: pd.DataFrame, window: pd.DataFrame
) -> list[Picture]:
    """Histogram and ECDF of each drifted numeric feature (most drifted first, at most 8)."""
    seen: list[str] = []
    for r in results:
        feature = r.get("feature")
        if r.get("drifted") and feature and feature not in seen:
            seen.append(feature)
    out = []
    for feature in seen:
        ref, cur = _numbers(baseline, feature), _numbers(window, feature)
        if len(ref) < 2 or len(cur) < 2:
            continue  # embeddings, categories, or too few values for a picture
        with np.errstate(over="ignore"):
            span = max(ref.max(), cur.max()) - min(ref.min(), cur.min())
        if not np.isfinite(span):
            continue  # values near ±1e308: no float axis spans them (the table still shows them)
        ref, cur, beyond = within_quantiles(ref, cur)
        note = f" (1st–99th percentile; {beyond} outliers in the end bins)" if beyond else ""
        out.append(Picture(f"{feature}: histogram{note}", histogram_svg(ref, cur)))
        out.append(Picture(f"{feature}: ECDF{note}", ecdf_svg(ref, cur)))
        if len(out) >= 2 * MAX_FEATURES:
            break
    return out


def embedding_picture(
    baseline: pd.DataFrame, window: pd.DataFrame, column: str = "prompt_embedding"
) -> Picture | None:
    def stack(frame: pd.DataFrame) -> np.ndarray:
        if column not in frame.columns:
            return np.empty((0, 0))
        vectors = [v for v in frame[column] if isinstance(v, np.ndarray | list) and len(v)]
        if not vectors:
            return np.empty((0, 0))
        dim = pd.Series([len(v) for v in vectors]).mode().iloc[0]  # rows of another model: left out
        return np.vstack([v for v in vectors if len(v) == dim]).astype(np.float64)

    ref, cur = stack(baseline), stack(window)
    if not len(ref) or not len(cur) or ref.shape[1] != cur.shape[1]:
        return None
    ref, cur = ref[subsample(ref)], cur[subsample(cur, seed=1)]
    ref_xy, cur_xy, _ = pca_2d(ref, cur)
    return Picture(
        "prompt embeddings (PCA; baseline grey, window blue)",
        svg_scatter(ref_xy, cur_xy, set(), size=360, axes=True),
    )


def report_pictures(
    results: list[dict[str, Any]], baseline: pd.DataFrame, window: pd.DataFrame
) -> list[Picture]:
    """What the report draws: drifted features over all traffic first, then the projection."""
    ordered = sorted(results, key=lambda r: (r.get("segment") != "*", not r.get("drifted")))
    pictures = feature_pictures(ordered, baseline, window)
    projection = embedding_picture(baseline, window)
    return pictures + ([projection] if projection is not None else [])
