"""Topics named by their words: what the moved prompts are about, in two words each.

The moved prompts (the new slices' rows, or a new cluster's representatives) lose the
sentences most of them share (a system preamble names no topic), are grouped by their words
(TF-IDF, k-means with k by silhouette), and each group is named by class-based TF-IDF against
the baseline's prompts: the term (a word or a pair of words) most frequent in the group and
rarest elsewhere; ties go to the term that comes first in the prompts, which reads best
("helm upgrade", not "upgrade chart"). Pure: texts in, named topics out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SHARED_SENTENCE_SHARE = 0.5  # a sentence in at least this share of the prompts is a preamble
MAX_TOPICS = 8
MAX_TEXTS = 2000
TOKEN = (
    r"(?u)\b[A-Za-z][A-Za-z0-9_\-]+\b"  # words, not numbers (order 42 and order 43 are one topic)
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# function words scikit-learn's English list lacks; they name no topic
EXTRA_STOP = frozenset(
    {
        "does",
        "did",
        "doing",
        "want",
        "wants",
        "need",
        "needs",
        "use",
        "using",
        "help",
        "please",
        "thanks",
        "hi",
        "hello",
    }
)


def _stop_words() -> list[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return sorted(ENGLISH_STOP_WORDS | EXTRA_STOP)


@dataclass(frozen=True)
class Topic:
    name: str
    size: int  # moved prompts in it
    share: float  # of the moved prompts
    examples: tuple[str, ...]


def strip_shared(texts: Sequence[str], share: float = SHARED_SENTENCE_SHARE) -> list[str]:
    """Each text without the sentences that at least `share` of the texts contain."""
    split = [[s.strip() for s in _SENTENCE.split(t or "") if s.strip()] for t in texts]
    counts = Counter(s for sentences in split for s in set(sentences))
    shared = {s for s, c in counts.items() if len(texts) > 1 and c >= share * len(texts)}
    return [" ".join(s for s in sentences if s not in shared) for sentences in split]


def _groups(texts: list[str], seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics import silhouette_score
    from threadpoolctl import threadpool_limits

    x = TfidfVectorizer(token_pattern=TOKEN, stop_words=_stop_words()).fit_transform(texts)
    distinct = len({tuple(row.indices) for row in x})
    best, labels = -1.0, np.zeros(len(texts), dtype=int)
    with threadpool_limits(1):
        for k in range(2, min(MAX_TOPICS, distinct, len(texts) - 1) + 1):
            found = KMeans(n_clusters=k, n_init=2, random_state=seed).fit_predict(x)
            score = silhouette_score(x, found) if len(set(found)) > 1 else -1.0
            if score > best + 1e-9:
                best, labels = score, found
    return labels


def _names(classes: list[list[str]], background: list[str]) -> list[str]:
    """Class-based TF-IDF: per class, tf(term, class) x log(1 + A / f(term)), A the mean number
    of terms per class, f the term's frequency over all classes (the baseline is one class)."""
    from sklearn.feature_extraction.text import CountVectorizer

    docs = [" \n ".join(c) for c in classes] + [" \n ".join(background)]
    vec = CountVectorizer(token_pattern=TOKEN, stop_words=_stop_words(), ngram_range=(1, 2))
    counts = vec.fit_transform(docs).toarray().astype(float)
    terms = vec.get_feature_names_out()
    tf = counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
    idf = np.log(1.0 + counts.sum(1).mean() / np.maximum(counts.sum(0), 1.0))
    scores = tf * idf
    analyze = vec.build_analyzer()
    names = []
    for i, texts in enumerate(classes):
        top = scores[i].max()
        tied = [t for t in np.flatnonzero(np.isclose(scores[i], top)) if top > 0]
        position = _positions(analyze(texts[0]))
        # first in the prompt among the tied; a pair of words before a single word
        best = min(
            tied,
            key=lambda t: (position.get(terms[t], len(position)), -len(terms[t].split())),
            default=None,
        )
        names.append(_original_case(str(terms[best]), texts) if best is not None else "")
    return names


def _positions(ngrams: list[str]) -> dict[str, int]:
    """Where each term starts in the text (the analyzer lists the words, then the pairs)."""
    words = [g for g in ngrams if " " not in g]
    out: dict[str, int] = {}
    for i, w in enumerate(words):
        out.setdefault(w, i)
        if i + 1 < len(words):
            out.setdefault(f"{w} {words[i + 1]}", i)
    return out


def _original_case(term: str, texts: list[str]) -> str:
    """The term as the prompts spell it (Terraform plan, CI runner)."""
    # a stop word may sit between the pair ("CI runner" from "my CI runner", "restart the pod")
    pattern = re.compile(
        r"\b" + r"\W+(?:\w+\W+)?".join(map(re.escape, term.split())) + r"\b", re.IGNORECASE
    )
    spelled = Counter(m.group(0) for t in texts for m in [pattern.search(t)] if m)
    return spelled.most_common(1)[0][0] if spelled else term


def name_topics(
    moved: Sequence[str], background: Sequence[str] = (), *, seed: int = 0
) -> list[Topic]:
    """The topics of the `moved` prompts, largest first, named against `background` (the
    baseline's prompts). Fewer than 2 non-empty prompts: no topics."""
    texts = strip_shared([t for t in moved if t][:MAX_TEXTS])
    keep = [t for t in texts if re.search(TOKEN, t)]
    if len(keep) < 2:
        return []
    labels = _groups(keep, seed)
    classes = [
        [t for t, g in zip(keep, labels, strict=True) if g == k] for k in sorted(set(labels))
    ]
    names = _names(classes, strip_shared([t for t in background if t][:MAX_TEXTS]) or [""])
    topics = [
        Topic(name, len(c), len(c) / len(keep), tuple(dict.fromkeys(c))[:3])
        for name, c in zip(names, classes, strict=True)
        if name
    ]
    return sorted(topics, key=lambda t: (-t.size, t.name))
