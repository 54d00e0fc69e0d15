"""Simulated response traffic and quiet model swaps for the response-test power comparison.

Each row is a prompt of one of `clusters` topics and its response: a 384-d unit embedding (the
topic's centre plus variation in a 32-d topic subspace plus isotropic noise, as sentence
embeddings of answers to one kind of prompt cluster) and four token statistics (mean logprob,
mean entropy, log completion tokens, log response chars) that depend on the topic and on one
latent "how sure and how long" factor the embedding also carries.

A swap of strength s (an earlier sibling with the prompts unchanged) moves every topic's
answers by s in three small ways at once: the embedding centre by s x 0.03 along a direction
shared by all topics plus one of the topic's own, the mean logprob up by s x 0.12 sd, the
length down by s x 0.08 sd. At s = 1 one 300-row window against the baseline's 1,200 rows
reads a single-kernel response MMD at p of order 0.01, the regime of a quiet swap that a
0.001 threshold misses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DIM = 384
SUBSPACE = 32


@dataclass
class Traffic:
    embeddings: np.ndarray  # (n, DIM) unit rows
    stats: np.ndarray  # (n, 4)
    topics: np.ndarray  # (n,)


class SwapWorld:
    """A fixed set of topics (seeded); `draw` samples traffic before or after a swap."""

    def __init__(self, seed: int = 0, clusters: int = 20) -> None:
        rng = np.random.default_rng([seed, 0])
        self.centres = _unit(rng.standard_normal((clusters, DIM)))
        self.bases = rng.standard_normal((clusters, DIM, SUBSPACE)) / np.sqrt(DIM)
        self.stat_means = rng.normal(0.0, 0.6, (clusters, 4))
        self.shared_dir = _unit(rng.standard_normal(DIM))
        self.own_dirs = _unit(rng.standard_normal((clusters, DIM)))
        self.latent_dir = _unit(rng.standard_normal(DIM))
        self.shares = rng.dirichlet(np.full(clusters, 2.0))

    def draw(self, n: int, strength: float, rng: np.random.Generator) -> Traffic:
        topics = rng.choice(len(self.centres), n, p=self.shares)
        latent = rng.standard_normal(n)
        local = np.einsum("ndk,nk->nd", self.bases[topics], rng.standard_normal((n, SUBSPACE)))
        emb = self.centres[topics] + 0.9 * local + 0.02 * rng.standard_normal((n, DIM))
        emb += 0.05 * latent[:, None] * self.latent_dir
        shift = (self.shared_dir + self.own_dirs[topics]) / np.sqrt(2.0)
        emb += strength * 0.03 * shift
        stats = self.stat_means[topics] + rng.standard_normal((n, 4)) * 0.8
        stats[:, 0] += 0.4 * latent + strength * 0.12
        stats[:, 2:] += -0.3 * latent[:, None] - strength * 0.08
        return Traffic(_unit(emb).astype(np.float32), stats, topics)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)
