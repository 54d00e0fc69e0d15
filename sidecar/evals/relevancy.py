"""Answer relevancy: the cosine similarity of the prompt's and the response's embeddings."""

from __future__ import annotations

import numpy as np


def relevancy(prompt_vecs: np.ndarray, response_vecs: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (n, d) matrices; a zero vector scores 0."""
    p = np.asarray(prompt_vecs, dtype=np.float64)
    r = np.asarray(response_vecs, dtype=np.float64)
    norms = np.linalg.norm(p, axis=1) * np.linalg.norm(r, axis=1)
    dots = np.einsum("ij,ij->i", p, r)
    cosines: np.ndarray = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return cosines
