"""Instruction n-gram shares: do the window's prompts use the baseline's instruction words as often?

Each row is one prompt's set of instruction words and word pairs (drift.features.instruction_words:
the wording it shares with the baseline's templates, its content masked). A reworded instruction
("Summarize" becoming "Condense" in one template) takes its old words out of that template's
prompts, which an embedding of the whole prompt, dominated by the content, barely shows.

Over the K n-grams that the most prompts of baseline ∪ window contain (ties by text), the share
of prompts holding each is compared between the sides by the two-proportion z with pooled
variance; the statistic is the largest |z|. Its p-value is a permutation test over the pooled
rows: each permutation draws which rows are "the window", and the largest |z| over the same K
n-grams is taken again, so the p-value already pays for comparing K of them (max-T), without
counting twice n-grams that always occur together. p = (1 + #{perm ≥ observed}) / (1 + B), with
B = `permutations_for(alpha)`: at least MIN_TAIL / alpha, so a drifting p stands on a count of
exceedances, not on one. Vectorised: the window counts of every permutation are one product of
a (B × N) 0/1 membership matrix with the (N × K) presence matrix. The permutations come from a
fixed seed (the same pair of sides gives the same p; the battery's random stream is untouched).
Each side is a seeded subsample of at most MAX_ROWS rows, so a 100,000-row baseline costs what
a 5,000-row one does. The detail names the n-grams that moved most (text, baseline share,
window share), at most MAX_NAMED, a word pair held by exactly the prompts of a word already
named (or the other way round) left out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

from drift.battery_inputs import TestInputs
from drift.features.feature_set import FeatureSet
from drift.features.instruction_words import INSTRUCTION_WORDS
from drift.formatting import clean_text, fmt_num
from drift.result import TestResult, insufficient
from drift.spec import TestSpec, register, run_test

NAME = "instruction_ngrams"
TOP_K = 50
MAX_ROWS = 5000  # per side
MIN_PERMUTATIONS = 999
MIN_TAIL = 2.0  # exceedances a p-value at alpha stands on
MAX_NAMED = 5
SEED = 0
CHUNK = 256  # permutations per matrix product


def permutations_for(alpha: float) -> int:
    """B with (1 + B) * alpha >= MIN_TAIL, at least MIN_PERMUTATIONS (1,999 at alpha 0.001)."""
    if not 0 < alpha < 1:
        return MIN_PERMUTATIONS
    return max(MIN_PERMUTATIONS, math.ceil(MIN_TAIL / alpha) - 1)


def top_ngrams(rows: Sequence[Sequence[str]], k: int = TOP_K) -> list[str]:
    """The `k` n-grams most rows hold (ties by text), leaving out those every row holds (a share
    of 1 on both sides cannot move, and its z is undefined)."""
    counts = Counter(chain.from_iterable(rows))
    kept = [(c, g) for g, c in counts.items() if c < len(rows)]
    kept.sort(key=lambda cg: (-cg[0], cg[1]))
    return [g for _, g in kept[:k]]


def presence(rows: Sequence[Sequence[str]], grams: Sequence[str]) -> np.ndarray:
    """(rows × grams) 0/1 float32: does row i hold n-gram j."""
    index = {g: j for j, g in enumerate(grams)}
    out = np.zeros((len(rows), len(grams)), dtype=np.float32)
    for i, row in enumerate(rows):
        for g in row:
            j = index.get(g)
            if j is not None:
                out[i, j] = 1.0
    return out


def z_scores(window_counts: np.ndarray, totals: np.ndarray, n_ref: int, n_cur: int) -> np.ndarray:
    """Two-proportion z (window share - baseline share, pooled variance) per n-gram; rows of
    `window_counts` are permutations (or the one observed split). Pooled totals are the same in
    every permutation, so only the window counts change."""
    c = np.asarray(window_counts, dtype=np.float64)
    pooled = totals / (n_ref + n_cur)
    se = np.sqrt(pooled * (1.0 - pooled) * (1.0 / n_ref + 1.0 / n_cur))
    diff = c / n_cur - (totals - c) / n_ref
    return np.divide(diff, se, out=np.zeros_like(diff), where=se > 0)


def window_members(n_total: int, n_cur: int, permutations: int, seed: int = SEED) -> np.ndarray:
    """(permutations × n_total) bool: row b marks the n_cur pooled rows permutation b calls "the
    window", a uniform draw without replacement (Floyd's algorithm, run for all permutations at
    once: one step per drawn row, the smaller side drawn)."""
    rng = np.random.default_rng([seed, n_total, n_cur])
    flip = n_cur > n_total // 2
    k = n_total - n_cur if flip else n_cur
    chosen = np.zeros((permutations, n_total), dtype=bool)
    rows = np.arange(permutations)
    for j in range(n_total - k, n_total):
        t = rng.integers(0, j + 1, size=permutations)
        t = np.where(chosen[rows, t], j, t)  # drawn before: take j, which no step has drawn
        chosen[rows, t] = True
    return ~chosen if flip else chosen


def max_abs_z_null(x: np.ndarray, n_cur: int, members: np.ndarray) -> np.ndarray:
    """The largest |z| over the columns of presence `x` for every permutation in `members`
    (window_members): the window counts are the membership matrix times `x`, CHUNK at a time."""
    totals = x.sum(0, dtype=np.float64)
    n_ref = x.shape[0] - n_cur
    out = np.empty(len(members))
    for lo in range(0, len(members), CHUNK):
        counts = members[lo : lo + CHUNK].astype(np.float32) @ x  # exact: counts < 2**24
        out[lo : lo + CHUNK] = np.abs(z_scores(counts, totals, n_ref, n_cur)).max(1)
    return out


def named(grams: Sequence[str], x: np.ndarray, z: np.ndarray, limit: int = MAX_NAMED) -> list[int]:
    """The n-grams that moved most (largest |z| first; n-grams of function words alone, "the",
    after the others: a person reads the rewording from its content words), at most `limit`,
    leaving out one held by exactly the same prompts as a word pair or word already named
    ("following article" with "article"): it says nothing new."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    function_only = [all(w in ENGLISH_STOP_WORDS for w in g.split(" ")) for g in grams]
    out: list[int] = []
    for j in np.lexsort((-np.abs(z), function_only)):
        if len(out) == limit:
            break
        if z[j] == 0:
            continue
        words = set(grams[j].split(" "))
        if any(
            (words <= set(grams[i].split(" ")) or set(grams[i].split(" ")) <= words)
            and np.array_equal(x[:, i], x[:, j])
            for i in out
        ):
            continue
        out.append(int(j))
    return out


def _subsample(rows: np.ndarray, limit: int, seed: list[int]) -> np.ndarray:
    if len(rows) <= limit:
        return rows
    pick = np.sort(np.random.default_rng(seed).choice(len(rows), limit, replace=False))
    return rows[pick]


def _sets(values: Sequence[object]) -> np.ndarray:
    """One tuple of strings per row (drift.features.instruction_words makes tuples; lists are
    read too)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        if type(v) is tuple:
            out[i] = v
        else:
            out[i] = (
                tuple(dict.fromkeys(str(g) for g in v)) if isinstance(v, (list, np.ndarray)) else ()
            )
    return out


def _instruction_ngram_test(
    reference: Sequence[object],
    current: Sequence[object],
    *,
    threshold: float,
    rng: np.random.Generator | None = None,
    min_samples: int = 30,
    k: int = TOP_K,
    permutations: int | None = None,
    max_rows: int = MAX_ROWS,
    effect_floor: float | None = None,
) -> TestResult:
    """Largest two-proportion |z| of the top-`k` instruction n-gram shares, permutation p-value
    (module doc). `reference`/`current`: one tuple of n-grams per prompt. `rng` is unused: the
    permutations come from the fixed seed."""
    ref = _subsample(_sets(reference), max_rows, [SEED, 1])
    cur = _subsample(_sets(current), max_rows, [SEED, 2])
    n_ref, n_cur = len(ref), len(cur)
    if n_ref < min_samples or n_cur < min_samples:
        return insufficient(NAME, threshold, n_ref, n_cur, min_samples)
    rows = [*ref, *cur]
    grams = top_ngrams(rows, k)
    b = permutations if permutations is not None else permutations_for(threshold)
    detail: dict[str, object] = {
        "n_reference": n_ref,
        "n_current": n_cur,
        "ngrams": len(grams),
        "permutations": b,
        "effect_floor": effect_floor,
    }
    if not grams:  # no instruction wording shared with the templates on either side
        return TestResult(NAME, 0.0, 1.0, threshold, False, detail={**detail, "p_raw": 1.0})
    x = presence(rows, grams)
    totals = x.sum(0, dtype=np.float64)
    window = x[n_ref:].sum(0, dtype=np.float64)
    z = z_scores(window[None, :], totals, n_ref, n_cur)[0]
    stat = float(np.abs(z).max())
    null = max_abs_z_null(x, n_cur, window_members(n_ref + n_cur, n_cur, b))
    p = float((1 + np.count_nonzero(null >= stat - 1e-9 * max(1.0, stat))) / (1 + b))
    moved = [
        {
            "ngram": grams[j],
            "baseline_share": float((totals[j] - window[j]) / n_ref),
            "window_share": float(window[j] / n_cur),
            "z": float(z[j]),
        }
        for j in named(grams, x, z)
    ]
    return TestResult(
        NAME,
        stat,
        p,
        threshold,
        False,  # the spec's verdict decides (TestSpec.run)
        detail={**detail, "p_raw": p, "moved": moved},
    )


def _collect(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    """The test on the prompts' instruction word sets, when both sides carry them."""
    if INSTRUCTION_WORDS not in ref.word_sets or INSTRUCTION_WORDS not in cur.word_sets:
        return []
    r, c = ref.word_sets[INSTRUCTION_WORDS], cur.word_sets[INSTRUCTION_WORDS]
    return [run_test(spec, INSTRUCTION_WORDS, r, c, inputs)]


def _pct(share: object) -> str:
    return fmt_num(share, ".0%").replace("%", " %")


def _phrase(r: TestResult, words: str, traffic: str) -> str:
    moved = [v for v in r.detail.get("moved") or [] if isinstance(v, dict)]
    named = (
        f"“{clean_text(v.get('ngram'))}” in {_pct(v.get('window_share'))} of prompts, "
        f"was {_pct(v.get('baseline_share'))}"
        for v in moved[:3]
    )
    return (", ".join(named) or f"{words} moved") + traffic


SPEC = register(
    TestSpec(
        name=NAME,
        kind="word_set",
        direction="p_value",
        default_threshold=0.001,
        min_samples=30,
        collect=_collect,
        phrase=_phrase,
        func=_instruction_ngram_test,
        per_feature=False,  # the prompts' instruction n-gram sets only: the battery runs it
        calibrated=True,
        description="largest two-proportion z of instruction n-gram shares, permutation p-value",
        display_name="the instruction-wording test",
        unit="largest two-proportion |z|",
    )
)


def instruction_ngram_test(reference: np.ndarray, current: np.ndarray, **kwargs: Any) -> TestResult:
    """The test with its spec's verdict (the registered function only measures)."""
    return SPEC.run(reference, current, **kwargs)
