"""Prompt and response texts of realistic length for the scale and embedding benchmarks.

No public prompt/response dataset installs from PyPI for offline use here, so the texts are
made: words drawn from the project's own English prose (README and docs), lengths drawn from
log-normal distributions with medians of 45 prompt words and 160 response words and a long
tail (about 1 % of prompts over 400 words), which is the shape chat logs have. Seeded."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
PROMPT_MEDIAN, RESPONSE_MEDIAN, SIGMA = 45, 160, 0.9
TOPICS = ("billing", "deploy", "latency", "login", "export", "quota", "webhook", "upgrade")


@lru_cache(maxsize=1)
def vocabulary() -> np.ndarray:
    words: list[str] = []
    for doc in ("README.md", "docs/architecture.md", "drift/README.md"):
        words += re.findall(r"[A-Za-z][a-z]{1,14}", (ROOT / doc).read_text())
    return np.array(words)


def lengths(rng: np.random.Generator, n: int, median: int) -> np.ndarray:
    return np.clip(np.round(rng.lognormal(np.log(median), SIGMA, n)), 1, 2000).astype(int)


def texts(rng: np.random.Generator, n: int, median: int, topic: str | None = None) -> list[str]:
    vocab = vocabulary()
    out = []
    for k in lengths(rng, n, median):
        words = vocab[rng.integers(0, len(vocab), int(k))]
        out.append((f"{topic}: " if topic else "") + " ".join(words))
    return out


def pairs(seed: int, n: int) -> list[tuple[str, str, str]]:
    """(topic, prompt, response) triples."""
    rng = np.random.default_rng(seed)
    topics = [TOPICS[i] for i in rng.integers(0, len(TOPICS), n)]
    prompts = [f"{t}: {p}" for t, p in zip(topics, texts(rng, n, PROMPT_MEDIAN), strict=True)]
    responses = texts(rng, n, RESPONSE_MEDIAN)
    return list(zip(topics, prompts, responses, strict=True))
