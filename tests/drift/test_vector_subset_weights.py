"""The whole-window embedding tests see the population mix when only a stratified subset of the
window's rows carries vectors, at a different rate per segment (drift.features.vector_subset)."""

from __future__ import annotations

import numpy as np

from drift.features.feature_set import EmbeddingBlock, FeatureSet
from drift.features.vector_subset import vector_keep_weights
from drift.features.weights import capped_weights, population_sample, thinning_rows

SEGMENTS = {"a": (600, 1.0, 50), "b": (300, 2.0, 100), "c": (100, 1.0, 50)}  # rows, weight, vectors


def _window(weighted: bool = True, vectors_of=None) -> FeatureSet:
    labels, weights, block_rows = [], [], []
    rng = np.random.default_rng(7)
    for seg, (n, w, e) in SEGMENTS.items():
        first = len(labels)
        labels += [seg] * n
        weights += [w if weighted else 1.0] * n
        count = n if vectors_of == "all" else e
        block_rows += list(first + np.sort(rng.choice(n, count, replace=False)))
    rows = np.asarray(block_rows, dtype=np.int64)
    n = len(labels)
    return FeatureSet(
        n=n,
        numeric={"prompt_chars": np.full(n, 30.0)},
        keys={"segment": np.asarray(labels, dtype=object)},
        embeddings={"prompt_embedding": EmbeddingBlock(rows, rng.normal(size=(rows.size, 3)))},
        weights=np.asarray(weights),
    )


def _vector_shares(fs: FeatureSet, trials: int = 300) -> dict[str, float]:
    kept = dict.fromkeys(SEGMENTS, 0)
    for seed in range(trials):
        pop = population_sample(fs, np.random.default_rng(seed))
        labels = pop.features.keys["segment"][pop.features.embeddings["prompt_embedding"].rows]
        for seg in SEGMENTS:
            kept[seg] += int(np.count_nonzero(labels == seg))
    total = sum(kept.values())
    return {seg: k / total for seg, k in kept.items()}


def _population_shares(weighted: bool) -> dict[str, float]:
    mass = {s: n * (w if weighted else 1.0) for s, (n, w, _) in SEGMENTS.items()}
    return {s: m / sum(mass.values()) for s, m in mass.items()}


def test_vector_rows_come_out_in_the_population_mix():
    for weighted in (True, False):
        got = _vector_shares(_window(weighted))
        want = _population_shares(weighted)
        # the subset's own mix (50:100:50 rows) is far from it: the thinning did the work
        assert all(abs(got[s] - want[s]) < 0.02 for s in SEGMENTS), (weighted, got, want)


def test_every_row_embedded_changes_nothing():
    fs = _window(vectors_of="all")
    assert vector_keep_weights(fs) == {}
    pop = population_sample(fs, np.random.default_rng(3))
    rows = thinning_rows(capped_weights(fs.weights), np.random.default_rng(3))
    np.testing.assert_array_equal(pop.rows, rows)  # the same draws as the window's thinning
    assert pop.features.embeddings["prompt_embedding"].rows.size == rows.size


def test_rows_without_text_are_not_rows_waiting_for_a_vector():
    fs = _window(vectors_of="all")
    no_text = np.ones(fs.n, dtype=bool)
    no_text[fs.embeddings["prompt_embedding"].rows[::2]] = False
    kept_rows = fs.embeddings["prompt_embedding"].rows[::2]
    fs.numeric["prompt_chars"] = np.where(no_text, np.nan, 30.0)
    fs.embeddings["prompt_embedding"] = EmbeddingBlock(
        kept_rows, fs.embeddings["prompt_embedding"].vectors[::2]
    )
    assert vector_keep_weights(fs) == {}


def test_keep_weights_are_the_segment_weight_over_its_vector_rows_weight():
    fs = _window()
    ratio = vector_keep_weights(fs)["prompt_embedding"]
    labels = fs.keys["segment"][fs.embeddings["prompt_embedding"].rows]
    for seg, (n, w, e) in SEGMENTS.items():
        np.testing.assert_allclose(ratio[labels == seg], (n * w) / (e * w))
