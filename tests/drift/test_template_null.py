"""The prompt-wording tests on stable traffic: calibrated on the baseline (split-half
validation, chunk-vs-rest calibration, drift.baseline.calibrate) and then run on fresh windows of
the same templates and new content, they raise prompt-side alerts at a known, small rate.

Oracle: with the templates' mix unchanged, each window's template shares are a multinomial
draw, so the Jensen–Shannon test (its null quantile at 0.999, drift.stattests.categorical) and
the new-wording check (nothing new to find) should fire in at most 1 of 20 windows; the
length of the instruction (PSI/KS/Wasserstein, calibrated) and the shares of its words
(instruction_ngrams, calibrated) likewise."""

from __future__ import annotations

import numpy as np

from drift.baseline.build import build_baseline
from drift.baseline.calibrate import calibrate_baseline
from drift.baseline.validate import validate_baseline
from drift.battery import BatteryOptions
from drift.run import run_drift
from tests.drift.test_template_attribution import window

PROMPT_RULES = {
    "prompt_template_mix",
    "new_prompt_template",
    "new_system_prompt",
    "token_psi",
    "instruction_words_shift",
}
WINDOWS = 20
CHEAP = BatteryOptions(
    tests=(
        "psi",
        "ks",
        "wasserstein",
        "chi2",
        "js",
        "new_category",
        "new_prompt_template",
        "instruction_ngrams",
    )
)


def test_stable_templates_raise_prompt_alerts_at_the_calibrated_rate():
    baseline = build_baseline(window(np.random.default_rng(51), 3000), seed=2, cluster=False)
    assert validate_baseline(baseline).valid
    calibrate_baseline(baseline, window_size=300, options=CHEAP)
    assert "js:prompt_template" in baseline.calibration["tests"]
    assert "instruction_ngrams:instruction_words" in baseline.calibration["tests"]
    fired = []
    for i in range(WINDOWS):
        report = run_drift(
            baseline,
            window(np.random.default_rng(1000 + i), 300),
            segment_by=[],
            rng_seed=i,
            options=CHEAP,
        )
        fired.append({a.rule for a in report.alerts} & PROMPT_RULES)
        [new] = report.results_for(test="new_prompt_template")
        assert new.detail["n_unseen"] <= 3  # fresh content in known wordings is matched
    assert sum(bool(f) for f in fired) <= 1, fired
