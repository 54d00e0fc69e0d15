"""Embedding throughput and precision: texts/s of the sidecar's embedder on one device and
precision, and each precision's cosine to fp32 reference vectors (computed on the CPU).

    python -m bench.suites.bench_embed --device cpu --dtypes fp32 --threads 2 --n 2000
    python -m bench.suites.bench_embed --device cuda --dtypes fp32,fp16,bf16 --n 200000 \\
        --model DIR --ref ref.npz --json out.json

The texts are bench/workloads/scale_texts.py's prompts and responses (half each), seeded; `--ref`
holds fp32 vectors of `corpus(len(ref))` (`--write-ref N` makes it)."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench.workloads.scale_texts import PROMPT_MEDIAN, RESPONSE_MEDIAN, texts
from sidecar.embed_device import EmbedConfig
from sidecar.embedder import get_embedder


def corpus(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    half = n // 2
    mixed = texts(rng, half, PROMPT_MEDIAN) + texts(rng, n - half, RESPONSE_MEDIAN)
    order = rng.permutation(n)
    return [mixed[i] for i in order]


def measure(config: EmbedConfig, items: list[str], ref: np.ndarray | None) -> dict:
    embedder = get_embedder(config)
    embedder.encode(items[:512])  # load, compile and warm the kernels
    if config.device == "cuda":
        import torch

        torch.cuda.synchronize()
    started = time.perf_counter()
    embedder.encode(items)
    seconds = time.perf_counter() - started
    out = {
        "device": embedder.device,
        "dtype": embedder.dtype,
        "threads": config.threads,
        "batch_tokens": embedder.batch_tokens,
        "texts": len(items),
        "seconds": round(seconds, 3),
        "texts_per_s": round(len(items) / seconds, 1),
    }
    if ref is not None:  # the reference holds the vectors of corpus(len(ref))
        cosine = np.sum(embedder.encode(corpus(len(ref))) * ref, axis=1)
        out.update(cos_min=float(cosine.min()), cos_mean=float(cosine.mean()), cos_n=len(ref))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtypes", default="auto")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--batch-tokens", default="auto", help="auto (by device) or a number")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--model")
    ap.add_argument("--ref")
    ap.add_argument(
        "--write-ref",
        type=int,
        default=0,
        help="write fp32 CPU vectors of the first N texts to --ref",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.write_ref:
        vecs = get_embedder(EmbedConfig(args.model, "cpu", "fp32", args.threads)).encode(
            corpus(args.write_ref)
        )
        np.save(args.ref, vecs)
        print(f"wrote {len(vecs)} reference vectors to {args.ref}")
        return
    items = corpus(args.n)
    ref = np.load(args.ref) if args.ref else None
    rows = []
    for dtype in args.dtypes.split(","):
        row = measure(
            EmbedConfig(args.model, args.device, dtype, args.threads, args.batch_tokens), items, ref
        )
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
