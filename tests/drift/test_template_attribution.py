"""A silent template rewording (same inputs, same prompt_version, new instruction text) moves the
responses while the prompt embeddings, dominated by the content, stay put: the template mix
and the new wording are the prompt-side evidence, so the response alert is `prompt`, and the
attribution lists what it stands on. Both sides moving with no prompt-side explanation is
`unclear`, not a guess."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from drift.alerting.attribution import attribute_alerts
from drift.baseline.build import Baseline, build_baseline
from drift.outcome import ProposedAlert
from drift.result import TestResult
from drift.run import run_drift

DIM = 16
_R = np.random.default_rng(41)
ANSWER_SHIFT = _R.normal(size=DIM)
_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))
WORDS = np.unique(
    ["".join(np.random.default_rng(i).choice(_LETTERS, 4 + i % 6)) for i in range(2000)]
)
WORDINGS = [
    "Summarize the following article:\n{c}\nSummary:",
    "Answer the question using the passage.\nPassage: {c}\nAnswer:",
    "What is the sentiment of the following review? {c}",
]
REWORDED = "Give a brief overview of the text below.\n{c}\nOverview:"


def window(rng: np.random.Generator, n: int, *, reword: bool = False) -> pd.DataFrame:
    """Three templates in turn; `reword`: the first template's prompts use a new wording and
    their answers move (the model answers the new instruction differently)."""
    which = np.arange(n) % 3
    prompts, shift = [], np.zeros((n, DIM))
    for i, k in enumerate(which):
        content = " ".join(rng.choice(WORDS, int(rng.integers(30, 150))))
        wording = REWORDED if reword and k == 0 else WORDINGS[k]
        prompts.append(wording.format(c=content))
        if reword and k == 0:
            shift[i] = 1.5 * ANSWER_SHIFT
    return pd.DataFrame(
        {
            "prompt_version": "v1",
            "prompt": prompts,
            "prompt_embedding": list(rng.normal(size=(n, DIM)).astype(np.float32)),
            "response_embedding": list((rng.normal(size=(n, DIM)) + shift).astype(np.float32)),
        }
    )


@pytest.fixture(scope="module")
def baseline() -> Baseline:
    return build_baseline(window(np.random.default_rng(42), 1200), seed=1)


def test_a_silent_rewording_is_attributed_to_the_prompt(baseline):
    report = run_drift(baseline, window(np.random.default_rng(43), 300, reword=True))
    [new] = report.results_for(test="new_prompt_template", segment="*")
    assert new.drifted and new.detail["new"][0]["template"].startswith("Give a brief overview")
    assert 0.3 <= new.detail["new"][0]["share"] <= 0.37
    mmd = report.results_for(test="mmd", feature="prompt_embedding", segment="*")[0]
    assert not mmd.drifted  # the content dominates the embedding: it did not move
    response = [a for a in report.alerts if a.rule.startswith("response")]
    assert response, [(a.rule, a.kind) for a in report.alerts]
    for alert in response:
        note = alert.evidence["attribution"]
        assert alert.kind == "prompt" and note["rule_kind"] == "model"
        assert note["confidence"] == "clear"
        assert {"js:prompt_template", "new_prompt_template:prompt_template"} & set(note["evidence"])
    wording = next(a for a in report.alerts if a.rule == "new_prompt_template")
    assert "“Give a brief overview of the text below." in wording.summary
    json.dumps([a.to_dict() for a in report.alerts], allow_nan=False)


def test_the_same_templates_raise_nothing_on_the_prompt_side(baseline):
    report = run_drift(baseline, window(np.random.default_rng(44), 300))
    assert not [a for a in report.alerts if a.kind == "prompt"], [a.rule for a in report.alerts]
    [new] = report.results_for(test="new_prompt_template", segment="*")
    assert not new.drifted and new.statistic == 0.0


def test_stored_baseline_labels_the_frozen_prompts_identically(baseline):
    frame = window(np.random.default_rng(42), 1200).iloc[baseline.rows].reset_index(drop=True)
    again = Baseline.from_dict(json.loads(json.dumps(baseline.to_dict(False))), features=frame)
    for name in ("prompt_template", "system_prompt"):
        assert list(again.features.categorical[name]) == list(baseline.features.categorical[name])
    assert again.frozen.templates == baseline.frozen.templates


def _result(test, feature, p=None, drifted=True):
    return TestResult(test, 1.0, p, 0.01, drifted, feature=feature)


def _proposal(kind, *features):
    evidence = {"results": [{"test": "x", "feature": f} for f in features]}
    return ProposedAlert("high", "r", kind, "*", "answers moved", evidence)


def test_both_sides_moving_without_a_prompt_side_explanation_is_unclear():
    weak = [  # prompt-side hits, each above the Bonferroni level 0.01 / 2
        _result("chi2", "prompt_template", p=0.008),
        _result("ks", "instruction_chars", p=0.009),
        _result("mmd", "response_embedding", p=1e-4),
    ]
    [alert] = attribute_alerts([_proposal("model", "response_embedding")], weak)
    note = alert.evidence["attribution"]
    assert alert.kind == "model" and note["confidence"] == "unclear"
    assert note["evidence"] == ["chi2:prompt_template", "ks:instruction_chars"]
    quiet = [weak[2]]
    [alert] = attribute_alerts([_proposal("model", "response_embedding")], quiet)
    assert alert.evidence["attribution"]["confidence"] == "clear"
    strong = [_result("js", "prompt_template"), weak[2]]
    [alert] = attribute_alerts([_proposal("model", "response_embedding")], strong)
    assert alert.kind == "prompt" and alert.evidence["attribution"]["evidence"] == [
        "js:prompt_template"
    ]


def test_the_incident_headline_names_the_new_wording_and_why(baseline):
    from drift.cause.explain import explain

    frame = window(np.random.default_rng(45), 300, reword=True)
    report = run_drift(baseline, frame)
    results = [r.to_dict() for r in report.results]
    cause = explain(results, report.segments, report.alerts, {}, [0.0] * len(frame))
    assert cause.headline.startswith("Prompts changed wording: “Give a brief overview")
    assert cause.headline.endswith("of traffic; answers moved with them")
    assert cause.why["kind"] == "prompt" and cause.why["confidence"] == "clear"
    assert "prompt templates" in " ".join(cause.why["supports"])
    json.dumps(cause.to_dict(), allow_nan=False)


def test_an_unclear_cause_says_so_in_the_headline():
    from drift.cause.explain import explain

    results = [
        _result("chi2", "prompt_template", p=0.008),
        _result("ks", "instruction_chars", p=0.009),
        _result("mmd", "response_embedding", p=1e-4),
    ]
    alerts = attribute_alerts([_proposal("model", "response_embedding")], results)
    sizes = {"*": {"n_current": 300, "n_reference": 1000}}
    cause = explain([r.to_dict() for r in results], sizes, alerts, {}, [0.0] * 300)
    assert cause.why["confidence"] == "unclear"
    assert cause.headline.endswith("cause unclear: prompts and answers both moved")
