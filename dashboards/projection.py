"""A 2-D picture of embeddings: PCA fitted on baseline and window together (so the axes show
where the two differ as much as where they agree), drawn as an inline SVG scatter."""

from __future__ import annotations

import numpy as np

MAX_POINTS = 1500  # per side: the picture, not the statistics, so a seeded subsample is enough


def subsample(x: np.ndarray, limit: int = MAX_POINTS, seed: int = 0) -> np.ndarray:
    """Row indices: all rows, or `limit` of them chosen with a fixed seed (sorted)."""
    if len(x) <= limit:
        return np.arange(len(x))
    return np.sort(np.random.default_rng(seed).choice(len(x), limit, replace=False))


def pca_2d(baseline: np.ndarray, window: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(baseline xy, window xy, explained variance ratio of the two axes)."""
    both = np.vstack([baseline, window]).astype(np.float64)
    centre = both.mean(axis=0)
    _, singular, vt = np.linalg.svd(both - centre, full_matrices=False)
    axes = vt[:2].T
    if axes.shape[1] < 2:  # a single distinct point: pad a flat second axis
        axes = np.hstack([axes, np.zeros((axes.shape[0], 2 - axes.shape[1]))])
    variance = singular**2
    ratio = variance[:2] / variance.sum() if variance.sum() > 0 else np.zeros(2)
    return (baseline - centre) @ axes, (window - centre) @ axes, np.pad(ratio, (0, 2 - len(ratio)))


def svg_scatter(
    baseline_xy: np.ndarray,
    window_xy: np.ndarray,
    highlight: set[int],
    size: int = 520,
    pad: int = 16,
    axes: bool = False,
) -> str:
    """Baseline points grey, window points blue, highlighted window points red (drawn last).
    `axes`: the two components' axes, named, and a legend (for a picture read without the page
    around it)."""
    if axes:
        pad = max(pad, 28)
    points = (
        np.vstack([baseline_xy, window_xy])
        if len(baseline_xy) + len(window_xy)
        else np.zeros((1, 2))
    )
    lo, hi = points.min(axis=0), points.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)

    def place(xy: np.ndarray) -> np.ndarray:
        scaled = (xy - lo) / span
        return np.column_stack(
            [pad + scaled[:, 0] * (size - 2 * pad), size - pad - scaled[:, 1] * (size - 2 * pad)]
        )

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
        f'viewBox="0 0 {size} {size}" '
        'role="img" aria-label="PCA projection of baseline and window embeddings" '
        'class="projection">',
        f'<rect width="{size}" height="{size}" fill="#fff" stroke="#ddd"/>',
    ]
    for x, y in place(baseline_xy):
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="#9e9e9e" fill-opacity="0.5" class="b"/>'
        )
    placed = place(window_xy)
    for i, (x, y) in enumerate(placed):
        if i not in highlight:
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.2" fill="#1f77b4" '
                'fill-opacity="0.6" class="w"/>'
            )
    for i in sorted(highlight):
        if 0 <= i < len(placed):
            x, y = placed[i]
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#d62728" class="n"/>')
    if axes:
        parts.append(_axes_and_legend(size, pad))
    parts.append("</svg>")
    return "".join(parts)


def _axes_and_legend(size: int, pad: int) -> str:
    """Both axes with their names, and which colour is which."""
    end = size - pad
    return (
        f'<g class="axes" stroke="#555" stroke-width="1">'
        f'<line x1="{pad}" y1="{end}" x2="{end}" y2="{end}"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{end}"/></g>'
        f'<text x="{size / 2:.0f}" y="{size - 8}" font-size="11" text-anchor="middle">'
        "1st principal component</text>"
        f'<text x="12" y="{size / 2:.0f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {size / 2:.0f})">2nd principal component</text>'
        f'<g class="legend" font-size="11">'
        f'<circle cx="{pad + 10}" cy="{pad - 12}" r="4" fill="#9e9e9e"/>'
        f'<text x="{pad + 18}" y="{pad - 8}">baseline</text>'
        f'<circle cx="{pad + 90}" cy="{pad - 12}" r="4" fill="#1f77b4"/>'
        f'<text x="{pad + 98}" y="{pad - 8}">this window</text></g>'
    )
