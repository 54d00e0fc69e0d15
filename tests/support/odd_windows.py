"""Reference/window record lists with the oddities real traffic brings, one switch each.

`odd_pair(seed, quirks)` builds a small, plausible reference (three embedding clusters, one of
them small) and a window, then applies each named quirk. Seeded: the same arguments give the
same records. The drift robustness tests draw seeds and quirk sets with hypothesis.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DIM = 8
_CENTRES = np.random.default_rng(99).normal(size=(4, DIM)) * 8.0  # the 4th: a brand-new topic

QUIRKS = (
    "new_category",  # a model_version / finish_reason / tool the reference never had
    "vanished_category",  # the window lacks a common reference value
    "new_segment",  # a tenant the reference never had
    "cluster_grows",  # the small reference cluster takes 40 % of the window
    "cluster_vanishes",  # a large reference cluster is absent from the window
    "new_cluster",  # a quarter of the window is a topic the reference never had
    "all_missing",  # a numeric column and a key are None everywhere in the window
    "constant",  # numeric columns constant in both
    "one_row",  # the window is a single record
    "empty_embeddings",  # some vectors are []
    "mixed_dims",  # one vector has another dimension
    "huge_numbers",  # 1e308, -1e308 and negative latencies
    "nan_numbers",  # NaN and inf in numeric fields
    "surrogates",  # lone surrogates in text, segment keys, categories and tool names
    "duplicate_ids",  # ids repeated within and across the files
    "no_embeddings",  # the window has no vectors at all
)


def _records(
    rng: np.random.Generator, n: int, shares: list[float], t0: float, tag: str
) -> list[dict]:
    labels = rng.choice(3, n, p=shares)
    vectors = _CENTRES[labels] + rng.normal(size=(n, DIM))
    out = []
    for i in range(n):
        tokens = int(rng.poisson(40)) + 1
        out.append(
            {
                "id": f"{tag}-{i}",
                "timestamp": t0 + float(i) * 10.0,
                "tenant": str(rng.choice(["acme", "globex"])),
                "segment": "web",
                "prompt_version": "v1",
                "model_version": "m1",
                "prompt": " ".join(["word"] * (tokens // 4 + 1)),
                "response": "ok " * int(rng.integers(1, 30)),
                "prompt_tokens": tokens,
                "completion_tokens": int(rng.poisson(80)) + 1,
                "latency_ms": float(rng.lognormal(5, 0.3)),
                "ttft_ms": float(rng.lognormal(3, 0.3)),
                "finish_reason": str(rng.choice(["stop", "length"], p=[0.8, 0.2])),
                "tools": [
                    str(t)
                    for t in rng.choice(["search", "calc"], int(rng.integers(0, 3)), replace=False)
                ],
                "eval_score": float(np.clip(rng.normal(0.8, 0.1), 0, 1)),
                "sample_weight": 1.0,
                "prompt_embedding": [float(x) for x in vectors[i]],
            }
        )
    return out


def odd_pair(
    seed: int, quirks: frozenset[str] | set[str], n_ref: int = 120, n_cur: int = 60
) -> tuple[list[dict], list[dict]]:
    unknown = set(quirks) - set(QUIRKS)
    if unknown:
        raise ValueError(f"unknown quirks {sorted(unknown)}")
    rng = np.random.default_rng(seed)
    ref = _records(rng, n_ref, [0.5, 0.42, 0.08], 1.7e9, "r")
    shares = [0.5, 0.42, 0.08]
    if "cluster_grows" in quirks:
        shares = [0.35, 0.25, 0.4]
    if "cluster_vanishes" in quirks:
        shares = [0.0, 0.9, 0.1] if "cluster_grows" not in quirks else [0.0, 0.6, 0.4]
    cur = _records(rng, n_cur, shares, 1.7e9 + 7200, "c")
    q = set(quirks)
    if "new_cluster" in q:
        for rec in cur[: len(cur) // 4]:
            rec["prompt_embedding"] = [float(x) for x in _CENTRES[3] + rng.normal(size=DIM)]
    if "new_category" in q:
        for rec in cur:
            rec["model_version"] = "m2"
            rec["finish_reason"] = "content_filter" if rng.random() < 0.3 else rec["finish_reason"]
            rec["tools"] = rec["tools"] + ["browser"]
    if "vanished_category" in q:
        for rec in cur:
            rec["finish_reason"] = "stop"
    if "new_segment" in q:
        for rec in cur[::2]:
            rec["tenant"] = "newco"
    if "all_missing" in q:
        for rec in cur:
            rec["latency_ms"] = None
            rec["tenant"] = None
    if "constant" in q:
        for rec in ref + cur:
            rec["ttft_ms"] = 5.0
            rec["prompt_tokens"] = 7
    if "empty_embeddings" in q:
        for rec in cur[::3] + ref[::7]:
            rec["prompt_embedding"] = []
    if "no_embeddings" in q:
        for rec in cur:
            rec.pop("prompt_embedding", None)
    if "mixed_dims" in q:
        cur[-1]["prompt_embedding"] = [0.5] * (DIM + 3)
    if "huge_numbers" in q:
        for i, rec in enumerate(cur):
            rec["latency_ms"] = [1e308, -1e308, -250.0][i % 3]
            rec["prompt_tokens"] = 10**18 if i % 2 else -3
        ref[0]["ttft_ms"] = 1e308
    if "nan_numbers" in q:
        for i, rec in enumerate(cur):
            rec["ttft_ms"] = [float("nan"), float("inf"), -float("inf")][i % 3]
            rec["eval_score"] = float("nan") if i % 2 else rec["eval_score"]
    if "surrogates" in q:
        for i, rec in enumerate(cur):
            rec["prompt"] = f"odd \ud800 text {i} \udfff"
            rec["tenant"] = "acme\udc80" if i % 2 else rec["tenant"]
            rec["finish_reason"] = "stop\ud834" if i % 3 == 0 else rec["finish_reason"]
            rec["tools"] = ["se\udd1earch"]
        ref[1]["response"] = "\udcff"
    if "duplicate_ids" in q:
        for i, rec in enumerate(cur):
            rec["id"] = ref[i % 5]["id"] if i % 2 else "dup"
    if "one_row" in q:
        cur = cur[:1]
    return ref, cur


def write_records(records: list[dict], path: Path) -> Path:
    """JSONL as a logger would write it (json's NaN/Infinity spelling, \\ud800-style escapes)."""
    with open(path, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
    return path


def fake_embed(texts: list[str]) -> np.ndarray:
    """Deterministic DIM-d vectors from text (stands in for MiniLM; lone surrogates allowed)."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        data = text.encode("utf-8", "surrogatepass")
        rng = np.random.default_rng(list(data[:64]) or [0])
        out[i] = rng.normal(size=DIM)
    return out
