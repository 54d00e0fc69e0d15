"""Which moved signal leads: effect size weighed by the traffic behind it.

A drifted result's effect is how far it passed its threshold (`effect`: statistic/threshold for
threshold tests, -log10 p over -log10 alpha for p-value tests, capped at MAX_EFFECT so one
degenerate statistic cannot win alone). Its weight is the share of the window its slice holds
and the number of samples behind it (`score` = log1p(effect) x share x min(1, n / FULL_N)).

The floor: a slice under FLOOR_SHARE of the window or with fewer than FLOOR_N samples cannot
lead while any slice at or above the floor moved (8 live requests, 2.6 % of a window, must not
head an incident caused by a tenant holding two thirds of it); it leads only when it is all
there is. Pure: numbers in, an order out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FLOOR_SHARE = 0.05
FLOOR_N = 30
FULL_N = 200  # samples at which a slice's count stops adding weight
MAX_EFFECT = 1e6


@dataclass(frozen=True)
class Ranked:
    index: int  # position in the input
    effect: float  # x threshold
    share: float  # of the window
    n: int  # samples behind the result
    above_floor: bool
    score: float


def effect(result: Mapping[str, Any]) -> float:
    """How far past its threshold a result is (1 = at the threshold); 0 when it cannot say."""
    stat, p, thr = result.get("statistic"), result.get("p_value"), result.get("threshold")
    if p is not None and thr is not None and 0 < thr < 1:  # a p-value test: alpha is the threshold
        p = max(float(p), 1e-300)
        return min(MAX_EFFECT, math.log10(p) / math.log10(thr)) if p < 1 else 0.0
    if stat is None or not math.isfinite(float(stat)):
        return 0.0
    if thr is not None and float(thr) > 0:
        return min(MAX_EFFECT, abs(float(stat)) / float(thr))
    return min(MAX_EFFECT, abs(float(stat)))  # no threshold (cluster growth: x baseline share)


def samples_behind(result: Mapping[str, Any], sizes: Mapping[str, Mapping[str, int]]) -> int:
    """The window rows a result stands on: its own count (a feature only some rows carry, e.g.
    latency of live requests, counts those rows), at most its slice's size."""
    slice_n = (sizes.get(result.get("segment") or "*") or {}).get("n_current")
    detail = result.get("detail") or {}
    own = detail.get("n_current_total", detail.get("n_current"))  # MMD subsamples: the whole count
    if result.get("test") == "new_prompt_template":  # the prompts in new wordings
        own = detail.get("n_unseen")
    elif result.get("test") == "new_category":  # the rows holding the new values, not the window
        own = sum(
            int(v.get("count") or 0)
            for v in detail.get("new") or []
            if isinstance(v, dict) and v.get("big")
        )
    counts = [int(v) for v in (slice_n, own) if isinstance(v, (int, float)) and math.isfinite(v)]
    return min(counts) if counts else 0


def rank(
    results: Sequence[Mapping[str, Any]],
    sizes: Mapping[str, Mapping[str, int]],
    n_window: int | None = None,
) -> list[Ranked]:
    """The drifted, sufficient results (result dicts: test, statistic, p_value, threshold,
    segment, detail) in leading order: above-floor slices first, then by score."""
    total = n_window if n_window else int((sizes.get("*") or {}).get("n_current") or 0)
    out = []
    for i, r in enumerate(results):
        if not r.get("drifted") or r.get("insufficient"):
            continue
        n = samples_behind(r, sizes)
        share = min(1.0, n / total) if total else 0.0
        e = effect(r)
        above = share >= FLOOR_SHARE and n >= FLOOR_N
        score = math.log1p(e) * share * min(1.0, n / FULL_N)
        out.append(Ranked(i, e, share, n, above, score))
    out.sort(key=lambda x: (not x.above_floor, -x.score, -x.effect, x.index))
    return out


def worst(
    results: Sequence[Mapping[str, Any]],
    sizes: Mapping[str, Mapping[str, int]],
    n_window: int | None = None,
) -> Ranked | None:
    ranked = rank(results, sizes, n_window)
    return ranked[0] if ranked else None
