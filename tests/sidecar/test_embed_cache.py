"""The embedding cache: a repeated text is looked up, not embedded again; the rows are those the
model gives; the least recently used texts leave first and the size never passes the capacity."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.embed_cache import EmbeddingCache
from sidecar.embedder import Embedder

DIM = 4


def _fake_rows(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in model: each text's row depends on the text alone."""
    return np.array(
        [np.random.default_rng(abs(hash(t)) % 2**32).normal(size=DIM) for t in texts],
        dtype=np.float32,
    )


class _Counting:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return _fake_rows(texts)


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(0, 5),
    batches=st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=6), max_size=8),
)
def test_rows_and_evictions_match_a_brute_force_lru(capacity, batches):
    cache, compute = EmbeddingCache(capacity), _Counting()
    lru: OrderedDict[str, None] = OrderedDict()  # the oracle: which texts a plain LRU holds
    for batch in batches:
        out = cache.encode(batch, DIM, compute)
        np.testing.assert_array_equal(out, _fake_rows(batch).reshape(len(batch), DIM))
        expected_misses = list(dict.fromkeys(t for t in batch if t not in lru))
        if expected_misses:
            assert compute.calls.pop() == expected_misses
        assert not compute.calls
        for t in batch:  # hits refresh in order; misses join after the batch's lookups
            if t in lru:
                lru.move_to_end(t)
        for t in expected_misses:
            if capacity:
                lru[t] = None
        while len(lru) > capacity:
            lru.popitem(last=False)
        assert len(cache) == len(lru) <= capacity


def test_negative_capacity_is_refused():
    with pytest.raises(ValueError, match="capacity"):
        EmbeddingCache(-1)


def test_the_real_model_through_the_cache_gives_its_own_rows(embedder):
    texts = ["Where is my parcel?", "How do I return an item?", "Where is my parcel?", "refund"]
    fresh = Embedder(embedder.name, embedder.model, embedder.device, embedder.dtype)
    cached = Embedder(
        embedder.name, embedder.model, embedder.device, embedder.dtype, cache=EmbeddingCache()
    )
    want = fresh.encode(texts)
    first, again = cached.encode(texts), cached.encode(texts[::-1])
    np.testing.assert_allclose(first, want, atol=1e-5)
    np.testing.assert_array_equal(again, first[::-1])
    assert (
        cached.cache is not None and cached.cache.misses == 3 and cached.cache.hits == 4
    )  # a repeat within one call is computed once, counted a miss
