"""Prompt templates: the constant wording an application wraps around each request's content.

A template's instruction sits at the edges of a prompt ("Summarize the following article:" in
front, "Summary:" at the end) while the content between them (an article, a question) is
different in every prompt and, being most of the text, dominates an embedding. So a template is
mined from a fixed-length *view* of each prompt's last user turn (drift.features.prompt_parts): its
first HEAD and last TAIL words, a line break as the word NEWLINE, short prompts padded with PAD.

Masking: the head keeps its longest prefix that at least MIN_SUPPORT of the baseline's prompts
(and MIN_COUNT of them) start with, the tail its longest such suffix; every other word becomes
MASK (padding stays PAD). Content seldom shares a prompt's first or last words with many other
prompts, template wording always does, so the masked view is the template with its content
blanked out. drain3's TemplateMiner (Drain: a fixed-depth prefix tree over the words,
similarity = the share of equal positions) then merges the masked views that agree on at least
SIMILARITY of their positions, so content that often starts alike ("The") does not split a
template; positions that differ inside a template become `<*>`. A prompt is labelled with the
template whose every word it holds in place (content positions match anything).

The model keeps only the frequent prefixes and suffixes and the template word lists (plain JSON:
`to_dict`/`from_dict`). A prompt that holds no template's words is UNSEEN: counted as such,
never dropped; so is free text (prompts that share no edge wording with enough others mine to a
template of blanks only, which is no template). Pure: strings in, labels out.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig

from drift.features.prompt_parts import split_chat
from drift.formatting import clean_text

HEAD, TAIL = 12, 8
PAD, MASK, NEWLINE, EDGE = "∅", "·", "↵", "…"
WILDCARD = "<*>"
MIN_SUPPORT, MIN_COUNT = 0.02, 5
SIMILARITY = 0.7
MIN_ROWS = 3
HELD_OUT_FOLDS = 5
MAX_WORD_CHARS = 40
EDGE_CHARS = 4096  # read from each end of a long text: enough for HEAD or TAIL words
MAX_TEXT_CHARS = 160  # a template's wording as shown to a person
UNSEEN = "unseen"
_OPEN = frozenset({MASK, PAD, WILDCARD, EDGE})
FORMAT = 1
_WORDS = re.compile(r"[^\S\n]*(\n)\s*|(\S+)")


def _words(text: str) -> list[str]:
    out: list[str] = []
    for m in _WORDS.finditer(text):
        if m.group(1) is not None:
            if out and out[-1] != NEWLINE:
                out.append(NEWLINE)
        else:
            out.append(m.group(2)[:MAX_WORD_CHARS])
    while out and out[-1] == NEWLINE:
        out.pop()
    return out


def view(text: str, head: int = HEAD, tail: int = TAIL) -> list[str]:
    """The first `head` and last `tail` words of `text`, padded, with EDGE between them."""
    text = clean_text(text) if isinstance(text, str) else ""
    if len(text) <= 2 * EDGE_CHARS:
        words = _words(text)
        first, last = words[:head], words[head:][-tail:] if tail else []
    else:  # the word cut at each chunk's inner end is dropped
        first = _words(text[:EDGE_CHARS])[:-1][:head]
        last = _words(text[-EDGE_CHARS:])[1:][-tail:] if tail else []
    return first + [PAD] * (head - len(first)) + [EDGE] + [PAD] * (tail - len(last)) + last


def prompt_view(prompt: str, head: int = HEAD, tail: int = TAIL) -> list[str]:
    """The view of a logged prompt's last user turn (its chat markers and system message off)."""
    return view(split_chat(prompt).user, head, tail)


def template_id(tokens: Sequence[str]) -> str:
    digest = hashlib.sha256("\x1f".join(tokens).encode("utf-8", "surrogatepass")).hexdigest()
    return "tpl-" + digest[:8]


def template_text(tokens: Sequence[str], limit: int = MAX_TEXT_CHARS) -> str:
    """A template's wording for a person: content as "…", line breaks as " / ", padding off."""
    out: list[str] = []
    for tok in tokens:
        word = EDGE if tok in (MASK, WILDCARD, EDGE) else "/" if tok == NEWLINE else tok
        if tok == PAD or (word in (EDGE, "/") and (not out or out[-1] in (EDGE, "/"))):
            if word == EDGE and out and out[-1] == "/":
                out[-1] = EDGE
            continue
        out.append(word)
    while out and out[-1] == "/":
        out.pop()
    text = clean_text(" ".join(out)) or EDGE
    return text if len(text) <= limit else text[: limit - 1].rstrip() + EDGE


def _miner(similarity: float) -> TemplateMiner:
    config = TemplateMinerConfig()
    config.drain_sim_th = similarity
    config.drain_depth = 4
    config.parametrize_numeric_tokens = False  # numbers in content are masked by position
    return TemplateMiner(config=config)


@dataclass
class TemplateModel:
    """Position vocabularies and templates frozen from a baseline's prompts."""

    prefixes: frozenset[tuple[str, ...]]  # frequent head prefixes
    suffixes: frozenset[tuple[str, ...]]  # frequent tail suffixes, read from the end
    templates: dict[str, tuple[str, ...]]  # id -> words (WILDCARD where members differ)
    counts: dict[str, int] = field(default_factory=dict)  # baseline prompts per template
    head: int = HEAD
    tail: int = TAIL
    similarity: float = SIMILARITY
    # (unseen, labelled) baseline prompts when each fold is labelled by a model fitted on the
    # others (held_out_unseen): the rate at which stable traffic matches no template
    held_out: tuple[int, int] | None = None
    _words: dict[str, list[tuple[int, str]]] | None = field(default=None, repr=False, compare=False)

    def mask(self, words: Sequence[str]) -> list[str]:
        return mask_view(words, self.head, self.prefixes, self.suffixes)

    def _match_one(self, masked: Sequence[str]) -> str:
        """The template whose every word the view holds at its position (MASK, PAD and `<*>`
        match anything), the one with the most words when several do; UNSEEN when none does."""
        if self._words is None:
            self._words = {
                key: [(i, w) for i, w in enumerate(words) if w not in _OPEN]
                for key, words in self.templates.items()
            }
        best, most = UNSEEN, -1
        for key in sorted(self._words):
            words = self._words[key]
            if len(words) > most and all(masked[i] == w for i, w in words):
                best, most = key, len(words)
        return best

    def label(self, prompts: Iterable[str]) -> np.ndarray:
        """Each prompt's template id, UNSEEN where none matches (one label per prompt)."""
        memo: dict[tuple[str, ...], str] = {}
        out = []
        for p in prompts:
            masked = tuple(self.mask(prompt_view(p, self.head, self.tail)))
            if masked not in memo:
                memo[masked] = self._match_one(masked)
            out.append(memo[masked])
        return np.asarray(out, dtype=object)

    def text(self, key: str) -> str:
        return template_text(self.templates[key]) if key in self.templates else "unseen wording"

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "head": self.head,
            "tail": self.tail,
            "similarity": self.similarity,
            "prefixes": sorted(list(p) for p in self.prefixes),
            "suffixes": sorted(list(p) for p in self.suffixes),
            "templates": {k: list(v) for k, v in self.templates.items()},
            "counts": dict(self.counts),
            "held_out": None if self.held_out is None else list(self.held_out),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TemplateModel:
        if data.get("format") != FORMAT:
            raise ValueError(f"template model format {data.get('format')!r} is not {FORMAT}")
        return cls(
            prefixes=frozenset(tuple(str(w) for w in p) for p in data["prefixes"]),
            suffixes=frozenset(tuple(str(w) for w in p) for p in data["suffixes"]),
            templates={str(k): tuple(str(w) for w in v) for k, v in data["templates"].items()},
            counts={str(k): int(v) for k, v in (data.get("counts") or {}).items()},
            head=int(data["head"]),
            tail=int(data["tail"]),
            similarity=float(data["similarity"]),
            held_out=_pair(data.get("held_out")),
        )


def _pair(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    unseen, rows = (int(v) for v in value)
    if not 0 <= unseen <= rows:
        raise ValueError(f"held-out unseen count {unseen} of {rows} rows")
    return unseen, rows


def _edge(words: Sequence[str], frequent: frozenset[tuple[str, ...]]) -> list[str]:
    """`words` with its longest frequent prefix kept, the rest MASK (PAD stays PAD)."""
    out, open_ = [], True
    for i, w in enumerate(words):
        open_ = open_ and (w == PAD or tuple(words[: i + 1]) in frequent)
        out.append(w if open_ or w == PAD else MASK)
    return out


def mask_view(
    words: Sequence[str],
    head: int,
    prefixes: frozenset[tuple[str, ...]],
    suffixes: frozenset[tuple[str, ...]],
) -> list[str]:
    first, last = list(words[:head]), list(words[head + 1 :])
    return _edge(first, prefixes) + [EDGE] + _edge(last[::-1], suffixes)[::-1]


def frequent_edges(
    views: Sequence[Sequence[str]], head: int, min_support: float, min_count: int
) -> tuple[frozenset[tuple[str, ...]], frozenset[tuple[str, ...]]]:
    """The head prefixes and (reversed) tail suffixes that enough of `views` share."""
    need = max(min_count, int(np.ceil(min_support * len(views))))
    pre: Counter[tuple[str, ...]] = Counter()
    suf: Counter[tuple[str, ...]] = Counter()
    for v in views:
        first, last = tuple(v[:head]), tuple(v[head + 1 :][::-1])
        pre.update(first[: i + 1] for i in range(len(first)))
        suf.update(last[: i + 1] for i in range(len(last)))
    return (
        frozenset(p for p, c in pre.items() if c >= need),
        frozenset(p for p, c in suf.items() if c >= need),
    )


def fit_templates(
    prompts: Sequence[str],
    *,
    head: int = HEAD,
    tail: int = TAIL,
    min_support: float = MIN_SUPPORT,
    min_count: int = MIN_COUNT,
    similarity: float = SIMILARITY,
    min_rows: int = MIN_ROWS,
) -> TemplateModel:
    """Mine the templates of `prompts` (see module doc); every prompt then carries the label of
    the template it matches (`TemplateModel.label`), which is how the baseline's rows are
    labelled too, so a model rebuilt from `to_dict` labels them identically."""
    views = [prompt_view(p, head, tail) for p in prompts]
    prefixes, suffixes = frequent_edges(views, head, min_support, min_count)
    miner = _miner(similarity)
    sizes: Counter[int] = Counter()
    for v in views:
        masked = mask_view(v, head, prefixes, suffixes)
        sizes[miner.add_log_message(" ".join(masked))["cluster_id"]] += 1
    templates: dict[str, tuple[str, ...]] = {}
    counts: dict[str, int] = {}
    for cluster in miner.drain.clusters:
        if sizes[cluster.cluster_id] < min_rows:
            continue  # a one-off wording: its prompts (and the window's like them) are UNSEEN
        words = tuple(cluster.log_template_tokens)
        if all(w in _OPEN or w == NEWLINE for w in words):
            continue  # prompts sharing no wording (free text): a catch-all is no template
        key = template_id(words)
        templates[key] = words
        counts[key] = counts.get(key, 0) + sizes[cluster.cluster_id]
    return TemplateModel(
        prefixes=prefixes,
        suffixes=suffixes,
        templates=templates,
        counts=counts,
        head=head,
        tail=tail,
        similarity=similarity,
    )


def held_out_unseen(
    prompts: Sequence[str], *, folds: int = HELD_OUT_FOLDS, seed: int = 0
) -> tuple[int, int]:
    """(unseen, labelled): each of `folds` random folds of `prompts` labelled by templates fitted
    on the other folds. In-sample every baseline prompt matches its own templates, so only
    prompts the model did not see tell how often stable traffic carries a wording no template
    holds (one-off wordings, rare templates): the null rate of a window's unseen share."""
    n = len(prompts)
    if n < 2 * folds:
        return 0, 0
    fold = np.random.default_rng(seed).permutation(n) % folds
    unseen = 0
    for k in range(folds):
        model = fit_templates([p for p, f in zip(prompts, fold, strict=True) if f != k])
        labels = model.label([p for p, f in zip(prompts, fold, strict=True) if f == k])
        unseen += int(np.count_nonzero(labels == UNSEEN))
    return unseen, n
