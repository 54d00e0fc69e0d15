"""The eval trend (drift.detectors.eval_trend) on every eval score: the window's, or the trailing
eval frame's when run_drift is given one (scope "eval")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drift.detectors.eval_trend import eval_trend_test
from drift.formatting import fmt_num
from drift.result import TestResult
from drift.spec import TestSpec, not_run, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs
    from drift.features.feature_set import FeatureSet


def eval_trend_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    opt = inputs.options
    return [
        eval_trend_test(
            ref.numeric[name],
            cur.numeric[name],
            threshold=opt.eval_drop,
            timestamps=cur.timestamps,
            alpha=opt.eval_alpha,
            window_days=opt.eval_window_days,
            min_samples=opt.eval_min_samples,
        ).with_context(feature=name)
        for name in ref.eval_names()
        if name in cur.numeric
    ]


def _phrase(r: TestResult, words: str, traffic: str) -> str:
    return f"{words} fell {fmt_num(r.statistic, '.1%')}{traffic}"


SPEC = register(
    TestSpec(
        name="eval_trend",
        kind="numeric",
        direction="statistic",
        own_rule=True,  # its detector combines several limits
        default_threshold=0.05,
        min_samples=20,
        phrase=_phrase,
        func=not_run,
        collect=eval_trend_results,
        per_feature=False,
        scope="eval",
        description="a significant relative drop of the trailing eval mean",
        display_name="the eval trend",
        unit="relative drop of the eval mean",
    )
)
