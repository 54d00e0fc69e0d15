"""Embeddings outside every baseline cluster, and a small cluster that grew
(drift.detectors.clusters): one detector, two results (`new_cluster` here, `cluster_growth`
described beside it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drift.detectors.clusters import cluster_results
from drift.formatting import fmt_num
from drift.result import TestResult
from drift.spec import TestSpec, not_run, register

if TYPE_CHECKING:
    from drift.battery_inputs import TestInputs
    from drift.features.feature_set import FeatureSet


def new_cluster_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    """Both results of each embedding feature the baseline froze clusters for."""
    opt, out = inputs.options, []
    for name in ref.embeddings:
        if name not in cur.embeddings or name not in inputs.frozen.clusters:
            continue
        for res in cluster_results(
            inputs.frozen.clusters[name],
            cur.embeddings[name].vectors,
            rng=inputs.rng,
            min_samples=opt.cluster_min_samples,
            **opt.cluster_kwargs,
        ):
            out.append(res.with_context(feature=name))
    return out


def _reason(r: TestResult) -> str:
    return (
        f"new_cluster on {r.feature}: a group of {fmt_num(r.statistic, '.0%')} of the "
        "second half lies outside every first-half cluster"
    )


def _new_phrase(r: TestResult, words: str, traffic: str) -> str:
    return f"a new group in {words}: {fmt_num(r.statistic, '.0%')} of the window"


def _growth_phrase(r: TestResult, words: str, traffic: str) -> str:
    return f"a small group in {words} grew {fmt_num(r.statistic)}x{traffic}"


SPEC = register(
    TestSpec(
        name="new_cluster",
        kind="embedding",
        direction="statistic",
        own_rule=True,  # its detector combines several limits
        default_threshold=0.10,
        min_samples=50,
        func=not_run,
        collect=new_cluster_results,
        per_feature=False,
        description="a group of embeddings outside every baseline cluster",
        reason=_reason,
        phrase=_new_phrase,
        display_name="the new-cluster check",
        unit="share of the window",
    )
)
GROWTH = register(
    TestSpec(
        name="cluster_growth",
        kind="embedding",
        direction="statistic",
        own_rule=True,  # its detector combines several limits
        default_threshold=2.0,
        min_samples=50,
        func=not_run,
        per_feature=False,
        scope="emitted",  # written by the new-cluster check's detector
        phrase=_growth_phrase,
        description="a small baseline cluster that grew",
        display_name="the cluster-growth check",
        unit="times the baseline share",
    )
)
