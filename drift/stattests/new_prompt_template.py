"""New prompt wordings on the whole window (drift.features.prompt_features.new_template_result):
more prompts in wordings the baseline never had than its held-out rate allows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drift.features.prompt_features import NEW_TEMPLATE, PROMPT_TEMPLATE, new_template_result
from drift.formatting import clean_text, fmt_num
from drift.result import TestResult
from drift.spec import TestSpec, not_run, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs
    from drift.features.feature_set import FeatureSet


def new_template_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    prompts = inputs.prompts
    if prompts is None or PROMPT_TEMPLATE not in cur.categorical:
        return []
    model = inputs.frozen.templates
    held_out = None if model is None else model.held_out
    return [new_template_result(cur.categorical[PROMPT_TEMPLATE], prompts, held_out=held_out)]


def _phrase(r: TestResult, words: str, traffic: str) -> str:
    big = [v for v in r.detail.get("new") or [] if isinstance(v, dict) and v.get("big")]
    named = (
        f"new prompt wording “{clean_text(v.get('template'))}”: "
        f"{fmt_num(v.get('share'), '.0%')} of the window"
        for v in big[:3]
    )
    return ", ".join(named) or (
        f"{fmt_num(r.statistic, '.0%')} of prompts in wordings the baseline never had"
    )


SPEC = register(
    TestSpec(
        name=NEW_TEMPLATE,
        kind="categorical",
        direction="statistic",
        own_rule=True,  # its detector combines several limits
        default_threshold=0.001,
        min_samples=3,
        phrase=_phrase,
        func=not_run,
        collect=new_template_results,
        per_feature=False,
        scope="window",
        description="prompts in wordings the baseline never had, beyond its held-out rate",
        display_name="the new-wording check",
        unit="share of the window's prompts",
    )
)
