"""Every test between two feature sets: the unit the job (per segment), baseline validation
(first half vs second half) and calibration (chunk vs rest) all run.

The tests come from the registry by kind: numeric features get the numeric tests (PSI, KS,
normalised Wasserstein; KS p-values Benjamini–Hochberg adjusted across the features of this
pair), eval scores also the eval trend; categoricals the categorical tests (chi-square,
Jensen–Shannon); embeddings the embedding tests run per feature (MMD) and, with a cluster
model, the new-cluster and cluster-growth checks; prompt embeddings also the cluster-mix test,
and responses the prompt-conditioned MMD and the aggregated response test
(drift.detectors.prompt_response); the prompts' instruction word sets the instruction n-gram shares
(drift.stattests.instruction_ngrams). Results carry the feature name; the caller sets the
segment.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from drift.battery_inputs import BatteryOptions, Frozen, Levels, TestInputs
from drift.detectors.multitest import benjamini_hochberg
from drift.features.feature_set import FeatureSet
from drift.registry import Scope, TestSpec, all_tests, find_test, get_test, run_test
from drift.result import TestResult
from drift.stattests.mmd import MMDReference

__all__ = ["BatteryOptions", "Frozen", "Levels", "run_battery"]

PAIR_SCOPES: tuple[Scope, ...] = ("pair", "eval")


def run_battery(
    ref: FeatureSet,
    cur: FeatureSet,
    *,
    frozen: Frozen,
    levels: Levels,
    rng: np.random.Generator,
    mmd_refs: dict[str, MMDReference] | None = None,
    options: BatteryOptions | None = None,
    scopes: Sequence[Scope] = PAIR_SCOPES,
    prompts: Sequence[object] | None = None,
) -> list[TestResult]:
    """Every registered test of `scopes` that the options want, on this pair."""
    opt = options or BatteryOptions()
    inputs = TestInputs(
        frozen=frozen,
        levels=levels,
        options=opt,
        rng=rng,
        mmd_refs=mmd_refs or {},
        prompts=prompts,
    )
    out: list[TestResult] = []
    for scope in scopes:
        for spec in all_tests(scope):
            if opt.wants(spec.name):
                out += spec_results(spec, ref, cur, inputs)
    adjust_across_features(out)
    return out


def spec_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    """One test's results on a pair: its own collector, or each feature of its kind."""
    if spec.collect is not None:
        return spec.collect(spec, ref, cur, inputs)
    if not spec.per_feature:
        return []
    out = [run_test(spec, name, r, c, inputs) for name, r, c in feature_pairs(spec, ref, cur)]
    if spec.kind == "numeric":  # medians and means: the change in the feature's own unit
        out = [
            replace(
                res,
                detail={
                    **res.detail,
                    **central_values(ref.numeric[res.feature], cur.numeric[res.feature]),
                },
            )
            for res in out
        ]
    return out


def feature_pairs(spec: TestSpec, ref: FeatureSet, cur: FeatureSet) -> list[tuple[str, Any, Any]]:
    """(feature, reference values, window values) of every feature of the spec's kind."""
    if spec.kind == "numeric":
        return [(n, ref.numeric[n], cur.numeric[n]) for n in ref.numeric if n in cur.numeric]
    if spec.kind == "categorical":
        return [
            (n, ref.categorical_values(n), cur.categorical_values(n))
            for n in ref.categorical
            if n in cur.categorical
        ]
    if spec.kind == "embedding":
        return [
            (n, b.vectors, cur.embeddings[n].vectors)
            for n, b in ref.embeddings.items()
            if n in cur.embeddings
        ]
    return [(n, ref.word_sets[n], cur.word_sets[n]) for n in ref.word_sets if n in cur.word_sets]


def central_values(ref: np.ndarray, cur: np.ndarray) -> dict[str, float]:
    """Medians and means of both sides (finite values): what a person reads the change in, in
    the feature's own unit ("answers are 38 % shorter")."""
    out: dict[str, float] = {}
    for side, values in (("reference", ref), ("window", cur)):
        finite = np.asarray(values, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        if finite.size:
            out[f"{side}_median"] = float(np.median(finite))
            out[f"{side}_mean"] = float(finite.mean())
    return out


def adjust_across_features(results: list[TestResult]) -> None:
    """For each test whose spec asks for it, replace its p-values across this pair's features by
    their Benjamini–Hochberg adjusted values and re-decide with the spec's verdict."""
    positions: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(results):
        spec = find_test(r.test)
        if spec and spec.adjusted_across_features and not r.insufficient and r.p_value is not None:
            positions[r.test].append(i)
    for test, idx in positions.items():
        spec = get_test(test)
        adjusted = benjamini_hochberg([float(results[i].p_value or 0.0) for i in idx])
        for i, p_adj in zip(idx, adjusted, strict=True):
            r = results[i]
            drifted = spec.verdict(
                r.statistic, float(p_adj), float(r.threshold or 0.0), r.detail.get("effect_floor")
            )
            results[i] = replace(
                r,
                p_value=float(p_adj),
                drifted=drifted,
                detail={**r.detail, "p_bh": float(p_adj), "family_size": len(idx)},
            )
