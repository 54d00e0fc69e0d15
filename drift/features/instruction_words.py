"""Each prompt's instruction words and their word 1- and 2-grams, as per-prompt presence sets.

A prompt's instruction words are the ones it shares with the baseline's templates: the words of
its view (drift.features.templates: the first HEAD and last TAIL words of its last user turn) that
the template model keeps (the baseline's frequent head prefixes and tail suffixes), the same wording
whose length is `instruction_chars` (drift.features.prompt_features). The content is masked there,
so it adds no words. Words are lower-cased with their leading and trailing punctuation cut off
("Summarize:" and "summarize" are one word); a 2-gram is two kept words side by side, never
across a masked stretch, a line break, the gap between head and tail or a punctuation-only
token. Each prompt gets the sorted tuple of its distinct 1- and 2-grams (empty when nothing is
kept: free text, an unseen wording, no prompt). Pure: strings in, tuples out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from drift.features.templates import EDGE, MASK, NEWLINE, PAD, WILDCARD, TemplateModel, prompt_view

INSTRUCTION_WORDS = "instruction_words"  # the feature: one n-gram set per row
_BREAKS = frozenset({MASK, PAD, EDGE, NEWLINE, WILDCARD})
_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")


def word(token: str) -> str:
    """A kept token as a word: lower case, no punctuation at its ends ("" when nothing is left)."""
    return _PUNCT.sub("", token.lower())


def masked_view(model: TemplateModel, prompt: str) -> list[str]:
    """One prompt's view with the template model's mask applied (kept words, MASK elsewhere)."""
    return model.mask(prompt_view(prompt, model.head, model.tail))


def instruction_runs(model: TemplateModel, prompt: str) -> list[list[str]]:
    """The runs of adjacent kept words of one prompt's view, in order."""
    return runs_of(masked_view(model, prompt))


def runs_of(masked: Sequence[str]) -> list[list[str]]:
    """The runs of adjacent kept words of a masked view, in order."""
    runs: list[list[str]] = [[]]
    for token in masked:
        w = "" if token in _BREAKS else word(token)
        if w:
            runs[-1].append(w)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def ngrams(runs: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """The distinct words and adjacent word pairs ("summarize the") of `runs`, sorted."""
    grams = {w for run in runs for w in run}
    grams |= {f"{a} {b}" for run in runs for a, b in zip(run, run[1:], strict=False)}
    return tuple(sorted(grams))


def instruction_ngrams(model: TemplateModel, prompts: Sequence[object]) -> np.ndarray:
    """One tuple of instruction 1- and 2-grams per prompt (object array; non-strings: empty)."""
    out = np.empty(len(prompts), dtype=object)
    for i, p in enumerate(prompts):
        out[i] = ngrams(instruction_runs(model, p if isinstance(p, str) else ""))
    return out
