"""Attribution: a response shift with the prompts moving is a prompt change; with the prompts
steady it is the model. Pure cases, then the whole drift job on generated windows (a silent
template change under the same prompt_version, and a model change)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from drift.alerting.attribution import attribute_alerts
from drift.baseline.build import build_baseline
from drift.outcome import ProposedAlert
from drift.result import TestResult
from drift.run import run_drift


def result(test, feature, *, p=None, segment="*", drifted=True):
    return TestResult(test, 1.0, p, 0.001, drifted, feature=feature, segment=segment)


def proposal(rule, kind, *features, segment="*"):
    evidence = {"results": [{"test": "x", "feature": f} for f in features]}
    return ProposedAlert("high", rule, kind, segment, f"{rule} drift", evidence)


def test_response_drift_with_prompts_moving_is_a_prompt_change():
    results = [
        result("mmd", "prompt_embedding", p=1e-4),
        result("mmd", "response_embedding", p=1e-4),
    ]
    alerts = attribute_alerts(
        [
            proposal("prompt_embedding_mmd", "prompt", "prompt_embedding"),
            proposal("response_embedding_mmd", "model", "response_embedding"),
        ],
        results,
    )
    assert [a.kind for a in alerts] == ["prompt", "prompt"]
    assert alerts[1].evidence["attribution"]["rule_kind"] == "model"
    assert "caused by the prompts: what prompts ask moved" in alerts[1].summary


def test_response_drift_with_prompts_steady_is_the_model():
    results = [
        result("mmd", "response_embedding", p=1e-4),
        result("psi", "completion_tokens"),
        result("mmd", "prompt_embedding", p=0.4, drifted=False),
    ]
    alerts = attribute_alerts(
        [
            proposal("response_embedding_mmd", "model", "response_embedding"),
            proposal("token_psi", "prompt", "completion_tokens"),
        ],
        results,
    )
    assert [a.kind for a in alerts] == ["model", "model"]


def test_attribution_is_per_segment_and_needs_strong_prompt_evidence():
    results = [
        result("cluster_mix", "prompt_embedding", p=1e-5, segment="tenant=a"),
        result("ks", "prompt_tokens", p=0.03, segment="tenant=b"),
    ]  # BH-level KS: too weak
    alerts = attribute_alerts(
        [
            proposal("r", "model", "response_embedding", segment="tenant=a"),
            proposal("r", "model", "response_embedding", segment="tenant=b"),
            proposal("e", "eval", "eval_score", segment="tenant=a"),
        ],
        results,
    )
    assert [a.kind for a in alerts] == ["prompt", "model", "eval"]


def test_one_chance_prompt_side_hit_among_several_does_not_relabel_a_model_change():
    """A tools chi-square at p = 0.009 beside four quiet prompt tests is chance (Bonferroni level
    0.01 / 5): the response drift stays `model`. Under a per-test 0.01 level it became `prompt`."""
    results = [
        result("chi2", "tool", p=0.009),
        result("ks", "prompt_chars", p=0.5, drifted=False),
        result("ks", "prompt_tokens", p=0.4, drifted=False),
        result("mmd", "prompt_embedding", p=0.3, drifted=False),
        result("cluster_mix", "prompt_embedding", p=0.6, drifted=False),
        result("mmd", "response_embedding", p=1e-3),
    ]
    alerts = attribute_alerts(
        [proposal("response_embedding_mmd", "model", "response_embedding")], results
    )
    assert [a.kind for a in alerts] == ["model"]
    strong = [*results[1:], result("chi2", "tool", p=1e-4)]
    alerts = attribute_alerts(
        [proposal("response_embedding_mmd", "model", "response_embedding")], strong
    )
    assert [a.kind for a in alerts] == ["prompt"]


def test_a_new_model_version_stays_a_model_change_while_prompts_move():
    """The rule names its own cause: a new model_version value is `model` whatever the prompts
    did (a prompt shift in the same window relabelled it `prompt`)."""
    results = [
        result("cluster_mix", "prompt_embedding", p=1e-5),
        result("new_category", "model_version"),
    ]
    alerts = attribute_alerts(
        [
            proposal("new_model_version", "model", "model_version"),
            proposal("response_embedding_mmd", "model", "response_embedding"),
        ],
        results,
    )
    assert [a.kind for a in alerts] == ["model", "prompt"]


DIM = 24
_W = np.random.default_rng(31)
TOPICS, ANSWERS = _W.normal(size=(3, DIM)) * 2.5, _W.normal(size=(3, DIM)) * 2.5
TEMPLATE_SHIFT, MODEL_SHIFT = _W.normal(size=DIM), _W.normal(size=DIM)


def window(rng, n, *, template=False, model=False):
    """Records with prompt_version v1 throughout. `template`: a new system prefix on every
    prompt (longer prompts, every prompt embedding moved), and answers follow the prompts;
    `model`: same prompts, answers moved and a little less confident."""
    topic = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    p_emb = TOPICS[topic] + rng.normal(size=(n, DIM)) + (1.2 * TEMPLATE_SHIFT if template else 0)
    r_emb = ANSWERS[topic] + rng.normal(size=(n, DIM)) + (0.8 * TEMPLATE_SHIFT if template else 0)
    r_emb = r_emb + (0.6 * MODEL_SHIFT if model else 0)
    chars = rng.poisson(200, n) + (120 if template else 0)
    return pd.DataFrame(
        {
            "prompt_version": "v1",
            "prompt": ["x" * c for c in chars],
            "prompt_tokens": chars // 4,
            "completion_tokens": rng.poisson(100, n) + 1,
            "mean_logprob": rng.normal(-0.6 - (0.05 if model else 0), 0.15, n),
            "prompt_embedding": list(p_emb.astype(np.float32)),
            "response_embedding": list(r_emb.astype(np.float32)),
        }
    )


@pytest.fixture(scope="module")
def baseline():
    return build_baseline(window(np.random.default_rng(32), 1500), seed=1)


def test_silent_template_change_is_a_prompt_alert_not_model(baseline):
    report = run_drift(baseline, window(np.random.default_rng(33), 400, template=True))
    kinds = {a.kind for a in report.alerts}
    assert "prompt" in kinds and "model" not in kinds, [(a.rule, a.kind) for a in report.alerts]
    assert any(a.rule.startswith("response") for a in report.alerts)  # responses moved too


def test_model_change_with_prompts_steady_is_a_model_alert(baseline):
    report = run_drift(baseline, window(np.random.default_rng(34), 400, model=True))
    kinds = {a.kind for a in report.alerts}
    assert "model" in kinds and "prompt" not in kinds, [(a.rule, a.kind) for a in report.alerts]
