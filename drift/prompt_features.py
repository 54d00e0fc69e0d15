"""Features of a prompt's wording that embeddings blur, from the baseline's template model.

- `prompt_template` (categorical): the template each prompt matches (drift.templates), UNSEEN
  where none; its shares are tested like any category (chi-square, Jensen–Shannon);
- `system_prompt` (categorical): a hash of the chat system message (drift.prompt_parts), so a
  changed system prompt shows as a new value without its text leaving the record;
- `instruction_chars` (numeric): the length of the wording the prompt shares with the
  baseline's templates (its kept head and tail words): a reworded or longer instruction moves
  it while the content's length, which dominates `prompt_chars`, does not.

`new_template_result` names the wording of the window's new templates: the prompts that match
no baseline template are mined on their own and each template that holds at least
NEW_MIN_SHARE of the window in NEW_MIN_COUNT prompts drifts. Pure: strings in, arrays out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from drift.features import FeatureSet
from drift.prompt_parts import split_chat, system_prompt_id
from drift.result import TestResult, insufficient
from drift.templates import MASK, PAD, UNSEEN, WILDCARD, TemplateModel, fit_templates, prompt_view

PROMPT_TEMPLATE = "prompt_template"
SYSTEM_PROMPT = "system_prompt"
INSTRUCTION_CHARS = "instruction_chars"
NEW_TEMPLATE = "new_prompt_template"
NEW_MIN_SHARE = 0.05
NEW_MIN_COUNT = 10
MAX_LISTED = 10


def prompt_texts(values: Sequence[object]) -> list[str]:
    return [v if isinstance(v, str) else "" for v in values]


def instruction_chars(model: TemplateModel, prompts: Sequence[str]) -> np.ndarray:
    out = np.empty(len(prompts), dtype=np.float64)
    for i, p in enumerate(prompts):
        kept = [w for w in model.mask(prompt_view(p, model.head, model.tail)) if len(w) > 1]
        out[i] = float(len(" ".join(kept)))
    return out


def add_prompt_features(
    fs: FeatureSet, prompts: Sequence[object], model: TemplateModel
) -> FeatureSet:
    """`fs` with the three prompt-wording features of its rows (one prompt per row), in place."""
    texts = prompt_texts(prompts)
    if len(texts) != fs.n:
        raise ValueError(f"{len(texts)} prompts for {fs.n} rows")
    fs.categorical[PROMPT_TEMPLATE] = model.label(texts)
    fs.categorical[SYSTEM_PROMPT] = np.asarray(
        [system_prompt_id(split_chat(t).system) for t in texts], dtype=object
    )
    fs.numeric[INSTRUCTION_CHARS] = instruction_chars(model, texts)
    return fs


def new_template_result(
    labels: np.ndarray,
    prompts: Sequence[object],
    *,
    min_share: float = NEW_MIN_SHARE,
    min_count: int = NEW_MIN_COUNT,
) -> TestResult:
    """The window's new wordings (see module doc); statistic = the window's UNSEEN share."""
    texts = prompt_texts(prompts)
    n = len(texts)
    if n == 0:
        return insufficient(NEW_TEMPLATE, min_share, 0, 0, 1)
    unseen = [t for t, lab in zip(texts, labels, strict=True) if lab == UNSEEN]
    listed = []
    if unseen:
        model = fit_templates(unseen, min_support=min_share, min_count=3)
        counts = Counter(model.label(unseen))
        for key, count in counts.most_common():
            words = model.templates.get(key, ())
            if key == UNSEEN or all(w in (MASK, PAD, WILDCARD) or len(w) < 2 for w in words):
                continue  # prompts that share no wording: no template to name
            share = count / n
            listed.append(
                {
                    "template": model.text(key),
                    "count": int(count),
                    "share": float(share),
                    "big": bool(share >= min_share and count >= min_count),
                }
            )
    return TestResult(
        test=NEW_TEMPLATE,
        statistic=float(len(unseen) / n),
        p_value=None,
        threshold=min_share,
        drifted=any(v["big"] for v in listed),
        detail={
            "new": listed[:MAX_LISTED],
            "n_unseen": len(unseen),
            "n_current": n,
            "min_count": min_count,
        },
        feature=PROMPT_TEMPLATE,
    )
