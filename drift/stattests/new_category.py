"""New values (drift.detectors.new_values) of every segment key and categorical feature, on the
whole window: a value the baseline never had, e.g. a new model version, tenant or finish reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drift.detectors.new_values import new_values_test
from drift.features.feature_set import MULTI_VALUED
from drift.features.prompt_features import PROMPT_TEMPLATE
from drift.formatting import clean_text, fmt_num
from drift.result import ALL, TestResult
from drift.spec import TestSpec, not_run, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs
    from drift.features.feature_set import FeatureSet


def new_category_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    """Shares by sample weight (per item for multi-valued features). Templates have their own
    check (drift.features.prompt_features.new_template_result), which names the wording."""
    out = []
    for name in [k for k in cur.keys if k in ref.keys]:
        res = new_values_test(ref.keys[name], cur.keys[name], weights=cur.weights)
        out.append(res.with_context(feature=name, segment=ALL))
    for name in [k for k in cur.categorical if k in ref.categorical and k != PROMPT_TEMPLATE]:
        weights = None if name in MULTI_VALUED else cur.weights
        res = new_values_test(
            ref.categorical_values(name), cur.categorical_values(name), weights=weights
        )
        out.append(res.with_context(feature=name, segment=ALL))
    return out


def _phrase(r: TestResult, words: str, traffic: str) -> str:
    big = [v for v in r.detail.get("new") or [] if isinstance(v, dict) and v.get("big")]
    named = (
        f"new {words} {clean_text(v.get('value'))}: {fmt_num(v.get('share'), '.0%')} of the window"
        for v in big[:5]
    )
    return ", ".join(named) or words


SPEC = register(
    TestSpec(
        name="new_category",
        kind="categorical",
        direction="statistic",
        own_rule=True,  # its detector combines several limits
        default_threshold=0.05,
        min_samples=10,
        phrase=_phrase,
        func=not_run,
        per_feature=False,
        collect=new_category_results,
        scope="window",
        description="values the baseline never had, taking a share of the window",
        display_name="the new-value check",
        unit="share of the window",
    )
)
