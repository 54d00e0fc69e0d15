"""Features of a prompt's wording that embeddings blur, from the baseline's template model.

- `prompt_template` (categorical): the template each prompt matches
  (drift.features.templates), UNSEEN where none; its shares are tested like any category
  (chi-square, Jensen–Shannon);
- `system_prompt` (categorical): a hash of the chat system message
  (drift.features.prompt_parts), so a changed system prompt shows as a new value without its
  text leaving the record;
- `instruction_chars` (numeric): the length of the wording the prompt shares with the
  baseline's templates (its kept head and tail words): a reworded or longer instruction moves
  it while the content's length, which dominates `prompt_chars`, does not;
- `instruction_words` (a word set per row, `FeatureSet.word_sets`): that same kept wording's
  words and word pairs (drift.features.instruction_words), whose shares the
  `instruction_ngrams` test compares (drift.stattests.instruction_ngrams).

`new_template_result` asks whether the window holds more prompts in wordings the baseline never
had than stable traffic does, and names those wordings. The null is the baseline's held-out
unseen rate (drift.features.templates.held_out_unseen: stable prompts that a model fitted
without them does not match), smoothed to (k + 1) / (n + 2) so that a baseline with none still
allows some; the result drifts when at least NEW_MIN_UNSEEN prompts are unseen and a binomial
draw at that rate reaches the window's count with probability under NEW_ALPHA. A window's share
counts, not how the new prompts group: a rewording used by 3 % of traffic is as real as one used
by 30 %, and two reworded templates of 2 prompts each in a 50-prompt window are 4 unseen prompts
where stable traffic has about none. The unseen prompts are then mined on their own to name
their wording (each named wording holds NEW_MIN_NAMED of them). Baselines stored without the
held-out rate keep the older rule: a wording holding NEW_MIN_SHARE of the window in
NEW_MIN_COUNT prompts. Pure: strings in, arrays out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy.stats import binom

from drift.features.feature_set import FeatureSet
from drift.features.instruction_words import INSTRUCTION_WORDS, masked_view, ngrams, runs_of
from drift.features.prompt_parts import split_chat, system_prompt_id
from drift.features.templates import MASK, PAD, UNSEEN, WILDCARD, TemplateModel, fit_templates
from drift.result import TestResult, insufficient

PROMPT_TEMPLATE = "prompt_template"
SYSTEM_PROMPT = "system_prompt"
INSTRUCTION_CHARS = "instruction_chars"
NEW_TEMPLATE = "new_prompt_template"
NEW_MIN_SHARE = 0.05
NEW_MIN_COUNT = 10
NEW_ALPHA = 0.001
NEW_MIN_UNSEEN = 3
NEW_MIN_NAMED = 2
NEW_MIN_WORDS = 2
MAX_LISTED = 10


def prompt_texts(values: Sequence[object]) -> list[str]:
    return [v if isinstance(v, str) else "" for v in values]


def instruction_chars(model: TemplateModel, prompts: Sequence[str]) -> np.ndarray:
    return _chars([masked_view(model, p) for p in prompts])


def _chars(views: Sequence[Sequence[str]]) -> np.ndarray:
    """The length of each masked view's kept wording (its words of more than one character)."""
    return np.asarray([len(" ".join(w for w in v if len(w) > 1)) for v in views], dtype=np.float64)


def add_prompt_features(
    fs: FeatureSet, prompts: Sequence[object], model: TemplateModel
) -> FeatureSet:
    """`fs` with the four prompt-wording features of its rows (one prompt per row), in place."""
    texts = prompt_texts(prompts)
    if len(texts) != fs.n:
        raise ValueError(f"{len(texts)} prompts for {fs.n} rows")
    fs.categorical[PROMPT_TEMPLATE] = model.label(texts)
    fs.categorical[SYSTEM_PROMPT] = np.asarray(
        [system_prompt_id(split_chat(t).system) for t in texts], dtype=object
    )
    views = [masked_view(model, t) for t in texts]  # masked once for both features
    fs.numeric[INSTRUCTION_CHARS] = _chars(views)
    words = np.empty(len(views), dtype=object)
    for i, v in enumerate(views):
        words[i] = ngrams(runs_of(v))
    fs.word_sets[INSTRUCTION_WORDS] = words
    return fs


def unseen_p_value(unseen: int, n: int, held_out: tuple[int, int]) -> tuple[float, float]:
    """(p, null rate): P(at least `unseen` of `n` stable prompts match no template) at the
    baseline's smoothed held-out unseen rate."""
    k0, n0 = held_out
    rate = (k0 + 1) / (n0 + 2)
    return float(binom.sf(unseen - 1, n, rate)) if unseen > 0 else 1.0, rate


def new_template_result(
    labels: np.ndarray,
    prompts: Sequence[object],
    *,
    held_out: tuple[int, int] | None = None,
    min_share: float = NEW_MIN_SHARE,
    min_count: int = NEW_MIN_COUNT,
    alpha: float = NEW_ALPHA,
) -> TestResult:
    """The window's new wordings (see module doc); statistic = the window's UNSEEN share."""
    texts = prompt_texts(prompts)
    n = len(texts)
    if n == 0:
        return insufficient(NEW_TEMPLATE, min_share, 0, 0, 1)
    unseen = [t for t, lab in zip(texts, labels, strict=True) if lab == UNSEEN]
    p_value, rate = (None, None) if held_out is None else unseen_p_value(len(unseen), n, held_out)
    many = p_value is not None and len(unseen) >= NEW_MIN_UNSEEN and p_value < alpha
    listed = []
    if unseen:
        floor = NEW_MIN_NAMED if held_out is not None else 3
        model = fit_templates(unseen, min_support=0.0, min_count=floor, min_rows=floor)
        counts = Counter(model.label(unseen))
        for key, count in counts.most_common():
            words = model.templates.get(key, ())
            real = [w for w in words if w not in (MASK, PAD, WILDCARD) and len(w) > 1]
            if key == UNSEEN or len(real) < NEW_MIN_WORDS:
                continue  # prompts that share a word or none (content alike): no wording to name
            share = count / n
            big = many if held_out is not None else share >= min_share and count >= min_count
            listed.append(
                {
                    "template": model.text(key),
                    "count": int(count),
                    "share": float(share),
                    "big": bool(big),
                }
            )
    drifted = many if held_out is not None else any(v["big"] for v in listed)
    detail: dict[str, object] = {
        "new": listed[:MAX_LISTED],
        "n_unseen": len(unseen),
        "n_current": n,
        "min_count": min_count if held_out is None else NEW_MIN_UNSEEN,
    }
    if rate is not None:
        detail["baseline_unseen_share"] = rate
    return TestResult(
        test=NEW_TEMPLATE,
        statistic=float(len(unseen) / n),
        p_value=p_value,
        threshold=min_share if held_out is None else alpha,
        drifted=bool(drifted),
        detail=detail,
        feature=PROMPT_TEMPLATE,
    )
