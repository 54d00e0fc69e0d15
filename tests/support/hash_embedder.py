"""A stand-in for the sidecar's embedder: deterministic unit vectors from the text, 384-d like
MiniLM, counting what it was asked to embed (the model is not what those tests are about)."""

from __future__ import annotations

from hashlib import blake2b

import numpy as np


class HashEmbedder:
    dim = 384

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[int] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(blake2b(t.encode(), digest_size=8).digest(), "big")
            out[i] = np.random.default_rng(seed).normal(size=self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)
