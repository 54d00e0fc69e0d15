"""Synthetic logged samples (the sample record's fields) with optional drift of one kind.

Embeddings are precomputed synthetic vectors (a mixture of clusters) so tests stay fast; one
test elsewhere uses the real MiniLM model.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

# one synthetic drift (make_samples(drift=...)) per kind the drift rules detect
from vigil.alert_table import DRIFT_KINDS as DRIFT_KINDS

DIM = 16
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda", "theta", "zeta"]
_CENTRES = np.random.default_rng(424242).normal(size=(5, DIM)) * 3.0  # fixed across draws
_NEW = np.random.default_rng(777).normal(size=DIM) * 3.0


def _mixture(rng, n, weights, centres):
    labels = rng.choice(len(weights), n, p=weights)
    return (centres[labels] + rng.normal(size=(n, DIM))).astype(np.float32)


def make_samples(
    n: int, seed: int, *, drift: str | None = None, t0: float = 1.7e9, span_s: float = 3600.0
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    prompt_tokens = rng.poisson(60, n) + 5
    completion_tokens = rng.poisson(120, n) + 1
    ttft = rng.lognormal(np.log(80), 0.25, n)
    tpot = rng.lognormal(np.log(20), 0.2, n)
    logprob = np.minimum(rng.normal(-0.6, 0.15, n), 0.0)  # a mean log-probability is <= 0
    entropy = rng.gamma(4.0, 0.3, n)
    evals = np.clip(rng.normal(0.8, 0.08, n), 0, 1)
    p_emb = _mixture(rng, n, [0.4, 0.3, 0.3], _CENTRES[:3])
    r_emb = _mixture(rng, n, [0.5, 0.5], _CENTRES[3:])
    if drift == "prompt":
        prompt_tokens = (prompt_tokens * 1.8).astype(int)
        p_emb = _mixture(rng, n, [0.1, 0.1, 0.8], _CENTRES[:3])
    elif drift == "model":
        r_emb = _mixture(rng, n, [0.9, 0.1], _CENTRES[3:]) + 0.5
        logprob = logprob - 0.3
    elif drift == "eval":
        evals = evals * 0.88
    elif drift == "persona":
        k = int(0.15 * n)
        p_emb[:k] = _NEW + rng.normal(size=(k, DIM))
    elif drift == "operational":
        ttft, tpot = ttft * 1.6, tpot * 1.6
    elif drift is not None:
        raise ValueError(drift)
    latency = ttft + tpot * completion_tokens
    prompts = [" ".join(rng.choice(WORDS, max(1, t // 4))) for t in prompt_tokens]
    return pd.DataFrame(
        {
            "id": [f"s{seed}-{i}" for i in range(n)],
            "timestamp": t0 + np.sort(rng.uniform(0, span_s, n)),
            "tenant": rng.choice(["acme", "globex"], n, p=[0.6, 0.4]),
            "prompt_version": "v1",
            "prompt": prompts,
            "response": ["ok " * int(c // 10) for c in completion_tokens],
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "finish_reason": rng.choice(["stop", "length"], n, p=[0.9, 0.1]),
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "latency_ms": latency,
            "mean_logprob": logprob,
            "mean_entropy": entropy,
            "tools": [
                list(rng.choice(["search", "calc"], rng.integers(0, 3), replace=False))
                for _ in range(n)
            ],
            "eval_score": evals,
            "prompt_embedding": list(p_emb),
            "response_embedding": list(r_emb),
        }
    )


def write_jsonl(frame: pd.DataFrame, path: Path) -> Path:
    with open(path, "w") as fh:
        for rec in frame.to_dict(orient="records"):
            rec = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in rec.items()}
            fh.write(json.dumps(rec) + "\n")
    return path
