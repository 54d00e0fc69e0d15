"""Responses compared within the same prompt template (drift.detectors.prompt_response,
`_by_template`).

Oracle: the windows of tests.drift.test_template_attribution, whose answers are drawn from the
same distribution per template unless the model moved them. A model whose answers moved for
every template moves the by-template tests; a rewording whose answers moved only for its own
(new) prompts does not, because those rows fall in a stratum the baseline lacks; the token
statistics carry the share of answers cut at the length limit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from drift.baseline.build import Baseline, build_baseline
from drift.battery import BatteryOptions
from drift.detectors.prompt_response import TRUNCATED, response_stat_matrices
from drift.features.feature_set import extract_features
from drift.run import run_drift
from tests.drift.test_template_attribution import ANSWER_SHIFT, window

ONLY = BatteryOptions(tests=("conditional_mmd", "new_prompt_template"), by_template=True)


@pytest.fixture(scope="module")
def baseline() -> Baseline:
    return build_baseline(window(np.random.default_rng(72), 900), seed=3)


def _by_template(report):
    return {r.feature: r for r in report.results_for(test="conditional_mmd", segment="*")}


def test_a_model_change_moves_responses_within_templates(baseline):
    frame = window(np.random.default_rng(73), 300)
    frame["response_embedding"] = [
        v + 1.2 * ANSWER_SHIFT.astype(np.float32) for v in frame["response_embedding"]
    ]
    found = _by_template(run_drift(baseline, frame, segment_by=[], options=ONLY))
    r = found["response_embedding_by_template"]
    assert r.drifted and r.p_value is not None and r.p_value < 0.01
    assert len(r.detail["strata"]) == 3  # the three baseline templates


def test_a_rewording_leaves_the_template_conditioned_responses_alone(baseline):
    quiet = 0
    for seed in range(5):
        report = run_drift(
            baseline,
            window(np.random.default_rng(80 + seed), 300, reword=True),
            segment_by=[],
            options=ONLY,
        )
        found = _by_template(report)
        [new] = report.results_for(test="new_prompt_template", segment="*")
        assert new.drifted
        quiet += not found["response_embedding_by_template"].drifted
        json.dumps([r.to_dict() for r in found.values()], allow_nan=False)
    assert quiet >= 4  # permutation tests at alpha 0.01: one in five may fire by chance


def test_token_statistics_carry_the_truncated_share():
    ref = window(np.random.default_rng(90), 200)
    cur = window(np.random.default_rng(91), 200)
    for frame, cut in ((ref, 0.1), (cur, 0.6)):
        frame["finish_reason"] = np.where(
            np.arange(len(frame)) < cut * len(frame), "length", "stop"
        )
        frame["completion_tokens"] = np.arange(len(frame)) % 50 + 1
    r, c, cols = response_stat_matrices(extract_features(ref), extract_features(cur))
    assert TRUNCATED in cols
    k = cols.index(TRUNCATED)
    sd = np.sqrt(0.1 * 0.9)
    assert np.isclose(r[:, k].mean(), 0.0) and np.isclose(c[:, k].mean(), (0.6 - 0.1) / sd)


def test_a_window_with_no_known_wording_skips_the_template_tests(baseline):
    frame = window(np.random.default_rng(92), 60)
    frame["prompt"] = [f"free text number {i} " + "zz " * (i % 7) for i in range(len(frame))]
    found = _by_template(run_drift(baseline, frame, segment_by=[], options=ONLY))
    assert "response_embedding_by_template" not in found
    assert "response_embedding" in found  # the cluster-conditioned test still runs


def test_template_conditioned_tests_are_off_by_default(baseline):
    report = run_drift(baseline, window(np.random.default_rng(93), 150), segment_by=[])
    features = {r.feature for r in report.results_for(test="conditional_mmd")}
    assert "response_embedding" in features and "response_embedding_by_template" not in features


def test_stratified_mmd_takes_empty_sides():
    from drift.stattests.conditional_mmd import stratified_mmd_test

    r = stratified_mmd_test(
        np.zeros((0, 3)),
        np.zeros((0, 3)),
        threshold=0.01,
        rng=np.random.default_rng(0),
        ref_strata=np.array([], dtype=str),
        cur_strata=np.array([], dtype=str),
    )
    assert r.insufficient
