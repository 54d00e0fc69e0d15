"""Power of the response-side drift tests on quiet swaps, side by side, at one false-alarm rate.

    python -m bench.suites.bench_response_power [--null 200] [--per-strength 60] [--base 1200] \
        [--window 300] [--strengths 0.5 1 1.5]

Candidates, each at the drift battery's threshold α = 0.001 on the same windows:

- `mmd` (embedding): the registered response MMD (one RBF kernel, median bandwidth);
- `mmd` (embedding) or on the token statistics: the two single tests, Bonferroni (α / 2 each);
- `classifier`: a cross-fitted logistic regression (baseline vs window rows, embedding plus
  statistics), each fold's held-out AUC tested by Mann-Whitney (exact null given the other
  fold), the folds' z-scores averaged (a conservative combination: their correlation ≤ 1);
- `response_agg` on the embedding only, and on the embedding plus statistics, unstratified and
  within prompt clusters (drift.stattests.response_agg).

Windows: `--null` windows with nothing changed (the false-alarm rate) and `--per-strength`
windows per swap strength (bench/workloads/swap_simulation.py), each against its own fresh baseline
draw (the simulation's topics fixed). Within-3-windows detection combines three consecutive windows'
p-values by drift.streams.window_evidence (a CUSUM of window evidence) at its calibrated ARL0.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy import stats as sps
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from bench.common.results_table import Table, write_results
from bench.workloads.swap_simulation import DIM, SwapWorld, Traffic
from drift.stattests.mmd import mmd_test
from drift.stattests.response_agg import response_agg_test
from drift.streams.window_evidence import WindowEvidence, calibrate_evidence

ALPHA = 0.001
ARL0_WINDOWS = 720  # a false page a month from hourly windows
Candidate = Callable[[Traffic, Traffic, np.random.Generator], float]


def standardised(ref: Traffic, cur: Traffic) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = ref.stats.mean(0), ref.stats.std(0)
    return (ref.stats - mu) / sd, (cur.stats - mu) / sd


def joint(ref: Traffic, cur: Traffic) -> tuple[np.ndarray, np.ndarray]:
    rs, cs = standardised(ref, cur)
    return np.hstack([ref.embeddings, rs]), np.hstack([cur.embeddings, cs])


def mmd_embedding(ref, cur, rng) -> float:
    return float(mmd_test(ref.embeddings, cur.embeddings, threshold=ALPHA, rng=rng).p_value)


def mmd_bonferroni(ref, cur, rng) -> float:
    rs, cs = standardised(ref, cur)
    p_stats = mmd_test(rs, cs, threshold=ALPHA, rng=rng, n_permutations=1999).p_value
    p_emb = mmd_test(ref.embeddings, cur.embeddings, threshold=ALPHA, rng=rng, n_permutations=1999)
    return min(1.0, 2 * min(float(p_stats), float(p_emb.p_value)))


def classifier(ref, cur, rng) -> float:
    x_ref, x_cur = joint(ref, cur)
    x = np.vstack([x_ref, x_cur])
    y = np.r_[np.zeros(len(x_ref)), np.ones(len(x_cur))]
    zs = []
    folds = StratifiedKFold(2, shuffle=True, random_state=int(rng.integers(2**31)))
    for train, test in folds.split(x, y):
        model = LogisticRegression(C=0.1, max_iter=500).fit(x[train], y[train])
        score = model.decision_function(x[test])
        u = sps.mannwhitneyu(score[y[test] == 1], score[y[test] == 0], alternative="greater")
        zs.append(sps.norm.isf(u.pvalue))
    return float(sps.norm.sf(np.mean(zs)))


def agg(with_stats: bool, stratified: bool) -> Candidate:
    def run(ref: Traffic, cur: Traffic, rng: np.random.Generator) -> float:
        x, y = joint(ref, cur)
        blocks = (("embedding", 0, DIM), ("stats", DIM, DIM + 4))
        if not with_stats:
            x, y, blocks = x[:, :DIM], y[:, :DIM], blocks[:1]
        strata = (ref.topics, cur.topics) if stratified else (None, None)
        res = response_agg_test(
            x, y, threshold=ALPHA, rng=rng, blocks=blocks, ref_strata=strata[0],
            cur_strata=strata[1],
        )  # fmt: skip
        return float(res.p_value)

    return run


CANDIDATES: dict[str, Candidate] = {
    "mmd (embedding)": mmd_embedding,
    "mmd embedding or statistics, Bonferroni": mmd_bonferroni,
    "classifier AUC, cross-fitted": classifier,
    "response_agg, embedding": agg(False, False),
    "response_agg, embedding + statistics": agg(True, False),
    "response_agg, embedding + statistics, within prompt clusters": agg(True, True),
}


def within_three(p: np.ndarray) -> str:
    """Runs of 3 consecutive windows with an alarm by the third: a window's own p ≤ α, or the
    accumulated evidence (drift.streams.window_evidence) passing its calibrated level."""
    hits = runs = 0
    fresh = calibrate_evidence(arl0_windows=ARL0_WINDOWS, permutations=999).to_dict()
    for lo in range(0, len(p) - 2, 3):
        evidence = WindowEvidence.from_dict(fresh)
        fired = [evidence.update(float(v)).drifted or v <= ALPHA for v in p[lo : lo + 3]]
        hits, runs = hits + any(fired), runs + 1
    return f"{hits}/{runs}"


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def one_window(job: tuple) -> dict[str, tuple[float, float]]:
    """Every candidate's p-value (and seconds) on one seeded baseline + window pair."""
    label, strength, w, n_base, n_window, names = job
    world = SwapWorld(seed=0)
    data_rng = np.random.default_rng([7, int(strength * 100), w])
    ref, cur = world.draw(n_base, 0.0, data_rng), world.draw(n_window, strength, data_rng)
    out = {}
    for name in names:
        t0 = time.perf_counter()
        p = CANDIDATES[name](ref, cur, np.random.default_rng([11, w]))
        out[name] = (p, time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--null", type=int, default=200)
    ap.add_argument("--per-strength", type=int, default=60)
    ap.add_argument("--base", type=int, default=1200)
    ap.add_argument("--window", type=int, default=300)
    ap.add_argument("--strengths", type=float, nargs="+", default=[0.5, 1.0, 1.5])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--save", default=None, help="an .npz for every p-value")
    args = ap.parse_args()
    names = [n for n in CANDIDATES if not args.only or any(o in n for o in args.only)]
    kinds = [("null", 0.0, args.null)] + [
        (f"s={s:g}", s, args.per_strength) for s in args.strengths
    ]
    pvals: dict[tuple[str, str], list[float]] = {}
    seconds: dict[str, float] = dict.fromkeys(names, 0.0)
    jobs = [(label, s, w, args.base, args.window, names) for label, s, c in kinds for w in range(c)]
    with ProcessPoolExecutor(args.jobs, initializer=_one_thread) as pool:
        for (label, *_), out in zip(jobs, pool.map(one_window, jobs), strict=True):
            for name, (p, secs) in out.items():
                pvals.setdefault((name, label), []).append(p)
                seconds[name] += secs
    table = Table(
        f"windows with an alarm, {args.base}-row baseline, {args.window}-row windows: in the "
        f"window itself (p ≤ {ALPHA}) / within 3 windows (that, or the accumulated evidence "
        f"at ARL0 = {ARL0_WINDOWS} windows)",
        ["test", *(label for label, _, _ in kinds), "null p ≤ 0.05", "s per window"],
    )
    n_windows = sum(c for _, _, c in kinds)
    for name in names:
        cells = []
        for label, _, _ in kinds:
            p = np.asarray(pvals[(name, label)])
            cells.append(f"{int(np.sum(p <= ALPHA))}/{p.size} / {within_three(p)}")
        p_null = np.asarray(pvals[(name, "null")])
        cells.append(f"{np.mean(p_null <= 0.05):.3f}")
        print(table.add(name, *cells, f"{seconds[name] / n_windows:.2f}"), flush=True)
    np.savez(
        "/tmp/response_power_pvals.npz",
        **{f"{n}|{k}": np.asarray(v) for (n, k), v in pvals.items()},
    )
    write_results("response_power", [table])


if __name__ == "__main__":
    main()
