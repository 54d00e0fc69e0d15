"""Drift job throughput: a 1,000,000-sample window (10 numeric features) plus 50,000 × 384
embeddings against a 100,000-sample baseline — every test and the cluster checks — and, in the
same run, Evidently's DataDriftPreset on the same numeric data. Prints times and the ratio.

    .venv/bin/python -m bench.suites.bench_drift [--rows 1000000] [--emb 50000] [--base 100000] \
        [--no-evidently]

Threads: torch and BLAS/OpenMP pools are held to --threads (default 1): on a machine with few shared
cores
that is the stable setting; Evidently runs in the same process under the same limits.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
from threadpoolctl import threadpool_limits

from bench.common.results_table import Table, write_results
from drift.baseline.build import build_baseline
from drift.baseline.calibrate import calibrate_baseline
from drift.baseline.validate import validate_baseline
from drift.features.feature_set import EmbeddingBlock, FeatureSet
from drift.run import run_drift

FEATURES = (
    "prompt_chars",
    "prompt_tokens",
    "completion_tokens",
    "response_chars",
    "tools_count",
    "latency_ms",
    "ttft_ms",
    "tpot_ms",
    "mean_logprob",
    "mean_entropy",
)
DIM = 384


def numeric(rng: np.random.Generator, n: int, shifted: bool) -> dict[str, np.ndarray]:
    tokens = rng.poisson(300, n).astype(np.float64)
    out = {
        "prompt_chars": tokens * 4 + rng.normal(0, 20, n),
        "prompt_tokens": tokens,
        "completion_tokens": rng.poisson(150, n).astype(np.float64),
        "response_chars": rng.poisson(600, n).astype(np.float64),
        "tools_count": rng.integers(0, 3, n).astype(np.float64),
        "latency_ms": rng.lognormal(6.5, 0.4, n),
        "ttft_ms": rng.lognormal(4.5, 0.3, n),
        "tpot_ms": rng.lognormal(3.0, 0.2, n),
        "mean_logprob": rng.normal(-0.6, 0.15, n),
        "mean_entropy": rng.gamma(4.0, 0.3, n),
    }
    if shifted:  # two features drift so the alert paths run too
        out["ttft_ms"] = out["ttft_ms"] * 1.5
        out["prompt_tokens"] = out["prompt_tokens"] * 1.3
    return out


def embeddings(
    rng: np.random.Generator, centres: np.ndarray, n: int, new_share: float
) -> np.ndarray:
    labels = rng.choice(len(centres), n)
    x = centres[labels] + rng.normal(0, 0.05, (n, DIM)).astype(np.float32)
    k = int(new_share * n)
    if k:
        x[:k] = rng.normal(size=DIM).astype(np.float32) * 0.1 + rng.normal(
            0, 0.05, (k, DIM)
        ).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # unit, like MiniLM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--emb", type=int, default=50_000)
    ap.add_argument("--base", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tenants", type=int, default=0, help="also test per tenant (segments)")
    ap.add_argument("--no-evidently", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    limits = threadpool_limits(args.threads)  # noqa: F841 (held for the run)
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(8, DIM)).astype(np.float32) * 0.1

    ref = FeatureSet(
        n=args.base,
        numeric=numeric(rng, args.base, False),
        embeddings={
            "prompt_embedding": EmbeddingBlock(
                np.arange(args.base), embeddings(rng, centres, args.base, 0.0)
            )
        },
        timestamps=np.arange(args.base, dtype=np.float64),
    )
    emb_rows = np.sort(rng.choice(args.rows, args.emb, replace=False))
    cur = FeatureSet(
        n=args.rows,
        numeric=numeric(rng, args.rows, True),
        embeddings={
            "prompt_embedding": EmbeddingBlock(emb_rows, embeddings(rng, centres, args.emb, 0.10))
        },
    )
    if args.tenants:
        names = np.array([f"tenant-{i}" for i in range(args.tenants)], dtype=object)
        ref.keys["tenant"] = names[rng.integers(0, args.tenants, args.base)]
        cur.keys["tenant"] = names[rng.integers(0, args.tenants, args.rows)]

    t = time.perf_counter()
    baseline = build_baseline(ref, seed=0)
    t_build = time.perf_counter() - t
    t = time.perf_counter()
    valid = validate_baseline(baseline).valid
    t_validate = time.perf_counter() - t
    t = time.perf_counter()
    calibrate_baseline(baseline, window_size=args.rows)
    t_cal = time.perf_counter() - t
    t = time.perf_counter()
    baseline.mmd_references()["prompt_embedding"].kernel_xx()  # the cached reference block
    t_cache = time.perf_counter() - t
    print(
        f"baseline {args.base:,} rows: build+clusters {t_build:.1f} s, validate {t_validate:.1f} s "
        f"(valid={valid}), calibrate {t_cal:.1f} s, MMD reference kernel {t_cache:.2f} s (once)"
    )
    table = Table(
        f"{args.rows:,} x {len(FEATURES)} numeric + {args.emb:,} x {DIM} embeddings vs a "
        f"{args.base:,}-sample baseline, {args.threads} thread(s)",
        ["step", "seconds", "detail"],
    )
    table.add("baseline build + clusters", f"{t_build:.1f}", f"{args.base:,} rows")
    table.add("baseline validate", f"{t_validate:.1f}", f"valid={valid}")
    table.add("baseline calibrate", f"{t_cal:.1f}", "")
    table.add("MMD reference kernel", f"{t_cache:.2f}", "once per baseline")

    t = time.perf_counter()
    report = run_drift(baseline, cur, segment_by=["tenant"] if args.tenants else [], rng_seed=0)
    t_vigil = time.perf_counter() - t
    tests = sorted({r.test for r in report.results})
    print(
        f"vigil drift job: {args.rows:,} x {len(FEATURES)} numeric + {args.emb:,} x {DIM} "
        f"embeddings vs {args.base:,}, {len(report.segments)} segment(s): {t_vigil:.1f} s  "
        f"({len(report.results)} results: "
        f"{', '.join(tests)}; alerts: {', '.join(sorted({a.rule for a in report.alerts}))})"
    )
    table.add(
        "vigil drift job",
        f"{t_vigil:.1f}",
        f"{len(report.segments)} segment(s), {len(report.results)} results",
    )

    if args.no_evidently:
        write_results("drift", [table])
        return
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    definition = DataDefinition(numerical_columns=list(FEATURES))
    t = time.perf_counter()
    ref_df = pd.DataFrame({k: ref.numeric[k] for k in FEATURES})
    cur_df = pd.DataFrame({k: cur.numeric[k] for k in FEATURES})
    snapshot = Report([DataDriftPreset()]).run(
        Dataset.from_pandas(cur_df, data_definition=definition),
        Dataset.from_pandas(ref_df, data_definition=definition),
    )
    t_ev = time.perf_counter() - t
    counts = [
        m["value"]
        for m in snapshot.dict()["metrics"]
        if str(m.get("metric_name", "")).startswith("DriftedColumnsCount")
    ]
    ours = sorted({r.feature for r in report.results if r.test == "psi" and r.drifted})
    print(
        f"evidently DataDriftPreset: same {args.rows:,} x {len(FEATURES)} numeric vs "
        f"{args.base:,}: "
        f"{t_ev:.1f} s  (drifted columns: {counts[0] if counts else '?'}; vigil PSI: {ours})"
    )
    print(
        f"ratio evidently / vigil (vigil also ran MMD + clusters on the embeddings): "
        f"{t_ev / t_vigil:.2f}x"
    )
    table.add(
        "Evidently DataDriftPreset (numeric only)",
        f"{t_ev:.1f}",
        f"drifted columns: {counts[0] if counts else '?'}",
    )
    write_results(
        "drift",
        [table],
        [
            f"Evidently / vigil time: {t_ev / t_vigil:.2f}x "
            "(vigil also ran MMD and clusters on the embeddings)"
        ],
    )


if __name__ == "__main__":
    main()
