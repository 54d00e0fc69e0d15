"""Vectors of texts already embedded, kept per model so a repeated text is not embedded again.

Traffic repeats itself: templated prompts, FAQ questions, canned answers, a system prompt sent
with every request. The embed job, a baseline build and a drift window each embed the same texts
again; a hit costs a dictionary lookup where a miss costs a MiniLM forward pass (about a
millisecond a text on a CPU core). Keys are 16-byte BLAKE2 digests of the text as the model reads
it, so the cache holds no text; values are the float32 unit rows the embedder returned. The
least recently used entries go first once `capacity` is reached (20,000 rows of 384 floats:
about 31 MB).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

DEFAULT_CAPACITY = 20_000


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EmbeddingCache:
    """A thread-safe LRU map from text digests to embedding rows, for one model and precision."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._rows: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def encode(
        self, texts: Sequence[str], dim: int, compute: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        """(len(texts), dim) rows: cached ones looked up, the others from `compute` (called once,
        on the distinct missing texts in first-seen order) and then kept."""
        keys = [text_key(t) for t in texts]
        out = np.empty((len(texts), dim), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            for i, key in enumerate(keys):
                row = self._rows.get(key)
                if row is None:
                    missing.setdefault(key, []).append(i)
                else:
                    self._rows.move_to_end(key)
                    out[i] = row
            self.hits += len(keys) - sum(len(v) for v in missing.values())
            self.misses += len(missing)
        if not missing:
            return out
        firsts = [where[0] for where in missing.values()]
        fresh = np.asarray(compute([texts[i] for i in firsts]), dtype=np.float32)
        with self._lock:
            for (key, where), row in zip(missing.items(), fresh, strict=True):
                out[where] = row
                if self.capacity:
                    self._rows[key] = row.copy()
                    self._rows.move_to_end(key)
            while len(self._rows) > self.capacity:
                self._rows.popitem(last=False)
        return out
