"""Instruction n-gram shares (drift.features.instruction_words, drift.stattests.instruction_ngrams).

Oracles: a templated prompt's n-grams are its template's kept words and word pairs, none of its
content; for one n-gram the statistic is the two-proportion z computed by hand; the permutation
p-value equals a plain loop over the same permutations (sets counted in Python, z by math); the
permutation draw is a uniform subset. Behaviour: one or two instruction words changed inside 2
of 5 templates (content drawn the same way) is found and the changed words are named, while
stable windows drawn like the baseline fire at no more than the nominal rate (and the uncorrected
per-n-gram test, which the bound is there to catch, fires far more). Any prompt text (empty,
huge, unicode, one word, no template) yields word sets, a result, a summary line and JSON.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from drift.alerting.proposals import describe_hit
from drift.baseline.build import Baseline, build_baseline
from drift.baseline.calibrate import calibrate_baseline
from drift.baseline.validate import validate_baseline
from drift.battery import BatteryOptions
from drift.features.instruction_words import instruction_ngrams
from drift.features.templates import fit_templates
from drift.run import run_drift
from drift.stattests.instruction_ngrams import (
    instruction_ngram_test,
    max_abs_z_null,
    presence,
    window_members,
)
from tests.drift.test_templates import ODD_TEXT, content

TEMPLATES = [
    "Summarize the following article:\n{c}\nSummary:",
    "Answer the question using the passage.\nPassage: {c}\nAnswer:",
    "What is the sentiment of the following review? {c}",
    "Translate the text below into French.\n{c}\nFrench:",
    "Classify the topic of this news story.\n{c}\nTopic:",
]
SHARES = [0.3, 0.25, 0.2, 0.15, 0.1]
# one word changed in the first template, two in the fourth; the others as they were
REWORDED = [
    "Summarize the following essay:\n{c}\nSummary:",
    TEMPLATES[1],
    TEMPLATES[2],
    "Translate the text below into German.\n{c}\nGerman:",
    TEMPLATES[4],
]


def draw(rng: np.random.Generator, n: int, templates: list[str]) -> list[str]:
    """`n` prompts, each template drawn at random with SHARES, content drawn afresh."""
    picks = rng.choice(len(templates), size=n, p=SHARES)
    return [templates[k].format(c=content(rng)) for k in picks]


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(11)
    base = draw(rng, 1500, TEMPLATES)
    model = fit_templates(base)
    return model, instruction_ngrams(model, base)


def test_ngrams_are_the_template_words_and_pairs_not_the_content(fitted):
    model, _ = fitted
    rng = np.random.default_rng(1)
    body = content(rng)
    [grams] = instruction_ngrams(model, [TEMPLATES[0].format(c=body)])
    assert {"summarize", "the", "following", "article", "summary"} <= set(grams)
    assert {"summarize the", "the following", "following article"} <= set(grams)
    assert "article summary" not in grams  # the masked content lies between them
    assert not set(grams) & set(body.split()[1:-1])
    empty = instruction_ngrams(model, ["", None, 7, "zzz qqq"])
    assert [len(g) for g in empty] == [0, 0, 0, 0]


def test_statistic_is_the_hand_computed_two_proportion_z():
    ref = [("x",)] * 25 + [("y",)] * 5 + [()] * 10
    cur = [("x",)] * 25 + [("y",)] * 2 + [()] * 3
    r = instruction_ngram_test(ref, cur, threshold=0.01, k=1, permutations=99)
    assert r.detail["ngrams"] == 1  # the top one only: "x", in 50 prompts
    p1, p2, pooled = 25 / 40, 25 / 30, 50 / 70
    z = (p2 - p1) / math.sqrt(pooled * (1 - pooled) * (1 / 40 + 1 / 30))
    assert r.statistic == pytest.approx(abs(z), rel=1e-12)
    [moved] = r.detail["moved"]
    assert moved["ngram"] == "x" and moved["z"] == pytest.approx(z, rel=1e-12)
    assert (moved["baseline_share"], moved["window_share"]) == pytest.approx((p1, p2))


def _brute_force_p(ref, cur, k, permutations):
    """The p-value by a plain loop: top-k n-grams counted in Python, each permutation's window
    read from the same membership rows, z by math, exceedances counted one by one."""
    rows = [set(r) for r in [*ref, *cur]]
    n, m = len(ref), len(cur)
    counts = Counter(g for r in rows for g in r)
    grams = sorted((g for g, c in counts.items() if c < len(rows)), key=lambda g: (-counts[g], g))
    grams = grams[:k]

    def max_z(window: set[int]) -> float:
        best = 0.0
        for g in grams:
            total = sum(g in r for r in rows)
            c = sum(g in rows[i] for i in window)
            pooled = total / (n + m)
            se = math.sqrt(pooled * (1 - pooled) * (1 / n + 1 / m))
            best = max(best, abs((c / m - (total - c) / n) / se))
        return best

    observed = max_z(set(range(n, n + m)))
    members = window_members(n + m, m, permutations)
    hits = sum(
        max_z(set(np.flatnonzero(row).tolist())) >= observed - 1e-9 * max(1.0, observed)
        for row in members
    )
    return (1 + hits) / (1 + permutations), observed


@pytest.mark.parametrize("n_ref, n_cur, seed", [(60, 40, 0), (40, 70, 1), (90, 35, 2)])
def test_p_value_equals_a_brute_force_loop_over_the_same_permutations(n_ref, n_cur, seed):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12)]

    def row(tilt: float) -> tuple[str, ...]:
        keep = rng.random(len(vocab)) < np.linspace(0.1, 0.9, len(vocab)) * tilt
        return tuple(sorted(w for w, k in zip(vocab, keep, strict=True) if k))

    ref = [row(1.0) for _ in range(n_ref)]
    cur = [row(1.1) for _ in range(n_cur)]
    r = instruction_ngram_test(ref, cur, threshold=0.05, k=8, permutations=199)
    p, observed = _brute_force_p(ref, cur, 8, 199)
    assert r.statistic == pytest.approx(observed, rel=1e-9)
    assert r.p_value == p


def test_permutation_draws_are_uniform_subsets():
    members = window_members(5, 2, 20_000, seed=3)
    assert (members.sum(1) == 2).all()
    subsets = Counter(tuple(np.flatnonzero(m)) for m in members)
    assert set(subsets) == set(itertools.combinations(range(5), 2))
    assert stats.chisquare(list(subsets.values())).pvalue > 0.001
    flipped = window_members(6, 5, 4000, seed=3)  # the larger side: drawn as its complement
    assert (flipped.sum(1) == 5).all()
    assert stats.chisquare(np.bincount(np.flatnonzero(~flipped) % 6, minlength=6)).pvalue > 0.001


def test_null_counts_are_the_membership_product():
    x = presence([("a",), ("a", "b"), ("b",), ()], ["a", "b"])
    members = np.array([[True, True, False, False], [False, False, True, True]])
    # window {0, 1}: a 2 of 2 vs 0 of 2, b 1 vs 1 -> |z| of a = 2; window {2, 3}: the mirror
    assert max_abs_z_null(x, 2, members) == pytest.approx([2.0, 2.0])


def test_a_partial_rewording_is_found_and_named(fitted):
    model, base = fitted
    rng = np.random.default_rng(21)
    window = instruction_ngrams(model, draw(rng, 300, REWORDED))
    r = instruction_ngram_test(base, window, threshold=0.001)
    assert r.drifted and r.p_value is not None and r.p_value <= 0.001
    named = [v["ngram"] for v in r.detail["moved"]]
    assert {"article", "french"} & set(named), named
    top = r.detail["moved"][0]
    assert top["window_share"] < top["baseline_share"]  # old words leave with the rewording
    line = describe_hit(r)
    assert "of prompts, was" in line and any(f"“{g}”" in line for g in named[:3]), line


def test_stable_windows_fire_at_most_at_the_nominal_rate(fitted):
    model, base = fitted
    rng = np.random.default_rng(5)
    p_values, naive = [], []
    for _ in range(40):
        window = instruction_ngrams(model, draw(rng, 300, TEMPLATES))
        r = instruction_ngram_test(base, window, threshold=0.01, permutations=999)
        p_values.append(r.p_value)
        # what the max-type p-value guards against: the smallest per-n-gram normal p, uncorrected
        smallest_z = float(r.statistic or 0.0)
        naive.append(2 * stats.norm.sf(smallest_z))
    p = np.asarray(p_values)
    assert np.sum(p <= 0.01) <= 2, p  # Bin(40, 0.01): P(>= 3) < 0.01
    assert np.sum(p <= 0.05) <= 6, p  # Bin(40, 0.05): P(>= 7) < 0.02
    assert np.sum(np.asarray(naive) <= 0.05) > 6, naive  # uncorrected: far more often


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(
    base=st.lists(ODD_TEXT, min_size=0, max_size=40),
    window=st.lists(ODD_TEXT, min_size=0, max_size=40),
    min_samples=st.sampled_from([1, 30]),
)
def test_any_prompts_give_word_sets_and_a_printable_result(fitted, base, window, min_samples):
    model, _ = fitted
    templated = draw(np.random.default_rng(len(base)), 10, TEMPLATES)
    ref = instruction_ngrams(model, base + templated)
    cur = instruction_ngrams(model, window)
    assert len(ref) == len(base) + 10 and len(cur) == len(window)
    assert all(isinstance(g, str) and g for row in [*ref, *cur] for g in row)
    r = instruction_ngram_test(ref, cur, threshold=0.001, min_samples=min_samples)
    r = r.with_context(feature="instruction_words")
    assert r.insufficient == (min(len(ref), len(cur)) < min_samples)
    if not r.insufficient:
        assert r.p_value is not None and 0 < r.p_value <= 1 and r.statistic >= 0
    describe_hit(r).encode("utf-8")
    json.dumps(r.to_dict(), allow_nan=False).encode("utf-8")


def _frame(prompts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"prompt_version": "v1", "prompt": prompts})


def test_the_drift_run_tests_names_and_attributes_a_partial_rewording():
    """Wired in: the baseline keeps the word sets (through JSON too), validation and calibration
    run the test, the window's result raises a prompt-side alert naming the words, and the
    option mechanism turns it off."""
    rng = np.random.default_rng(31)
    baseline = build_baseline(_frame(draw(rng, 1500, TEMPLATES)), seed=3, cluster=False)
    checked = validate_baseline(baseline)
    assert checked.valid and any(r.test == "instruction_ngrams" for r in checked.results)
    calibrate_baseline(baseline, window_size=300)
    assert baseline.calibration["tests"]["instruction_ngrams:instruction_words"]["n"] >= 4
    again = Baseline.from_dict(json.loads(json.dumps(baseline.to_dict())))
    assert list(again.features.word_sets["instruction_words"]) == list(
        baseline.features.word_sets["instruction_words"]
    )
    report = run_drift(again, _frame(draw(rng, 300, REWORDED)), segment_by=[])
    [r] = report.results_for(test="instruction_ngrams", segment="*")
    assert r.drifted and r.feature == "instruction_words"
    [alert] = [a for a in report.alerts if a.rule == "instruction_words_shift"]
    assert alert.kind == "prompt"
    assert re.match(r"“article” in 0 % of prompts, was 2\d %, “french” in 0 %", alert.summary)
    off = BatteryOptions(tests=("psi", "new_prompt_template"))
    quiet = run_drift(again, _frame(draw(rng, 300, REWORDED)), segment_by=[], options=off)
    assert not quiet.results_for(test="instruction_ngrams")


def test_content_words_are_named_before_function_words():
    """“the” moved more than “article”, yet the rewording reads from “article”; a word pair held
    by exactly the prompts of a named word adds nothing and is left out; unmoved n-grams never."""
    from drift.stattests.instruction_ngrams import named

    grams = ["the", "article", "the article", "summary", "of the"]
    x = np.array([[1, 1, 1, 0, 1], [1, 1, 1, 0, 0], [1, 0, 0, 1, 1], [0, 0, 0, 1, 0]])
    z = np.array([5.0, 3.0, 3.0, 0.0, 4.0])
    picked = [grams[j] for j in named(grams, x, z)]
    assert picked == ["article", "the", "of the"]
