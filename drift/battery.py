"""Every test between two feature sets: the unit the job (per segment), baseline validation
(first half vs second half) and calibration (chunk vs rest) all run.

The tests come from the registry by kind: numeric features get the numeric tests (PSI, KS,
normalised Wasserstein; KS p-values Benjamini–Hochberg adjusted across the features of this
pair), eval scores also the eval trend; categoricals the categorical tests (chi-square,
Jensen–Shannon); embeddings the embedding tests run per feature (MMD) and, with a cluster
model, the new-cluster and cluster-growth checks; prompt embeddings also the cluster-mix test,
and responses the prompt-conditioned MMD and the aggregated response test
(drift.prompt_response); the prompts' instruction word sets the instruction n-gram shares
(drift.stattests.instruction_ngrams). Results carry the feature name; the caller sets the
segment.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np

from drift.battery_inputs import BatteryOptions, Frozen, Levels, TestInputs, run_test
from drift.clusters import cluster_results
from drift.eval_trend import eval_trend_test
from drift.features import FeatureSet
from drift.instruction_words import INSTRUCTION_WORDS
from drift.multitest import benjamini_hochberg
from drift.prompt_response import aggregate_results, conditional_results, prompt_mix_results
from drift.registry import find_test, get_test, tests_for
from drift.result import TestResult
from drift.stattests.instruction_ngrams import NAME as NGRAMS
from drift.stattests.mmd import MMDReference

__all__ = ["BatteryOptions", "Frozen", "Levels", "run_battery"]


def run_battery(
    ref: FeatureSet,
    cur: FeatureSet,
    *,
    frozen: Frozen,
    levels: Levels,
    rng: np.random.Generator,
    mmd_refs: dict[str, MMDReference] | None = None,
    options: BatteryOptions | None = None,
) -> list[TestResult]:
    opt = options or BatteryOptions()
    inputs = TestInputs(frozen=frozen, levels=levels, options=opt, rng=rng, mmd_refs=mmd_refs or {})
    out: list[TestResult] = []
    numeric = [s for s in tests_for("numeric", per_feature=True) if opt.wants(s.name)]
    for name in ref.numeric:
        if name not in cur.numeric:
            continue
        r, c = ref.numeric[name], cur.numeric[name]
        centres = central_values(r, c)
        out += [
            replace(res, detail={**res.detail, **centres})
            for res in (run_test(spec, name, r, c, inputs) for spec in numeric)
        ]
        if name.startswith("eval_") and opt.wants("eval_trend"):
            res = eval_trend_test(
                r,
                c,
                threshold=opt.eval_drop,
                timestamps=cur.timestamps,
                alpha=opt.eval_alpha,
                window_days=opt.eval_window_days,
                min_samples=opt.eval_min_samples,
            )
            out.append(res.with_context(feature=name))
    adjust_across_features(out)

    categorical = [s for s in tests_for("categorical", per_feature=True) if opt.wants(s.name)]
    for name in ref.categorical:
        if name not in cur.categorical:
            continue
        r, c = ref.categorical_values(name), cur.categorical_values(name)
        out += [run_test(spec, name, r, c, inputs) for spec in categorical]

    embedding = [s for s in tests_for("embedding", per_feature=True) if opt.wants(s.name)]
    for name, block in ref.embeddings.items():
        if name not in cur.embeddings:
            continue
        y = cur.embeddings[name].vectors
        out += [run_test(spec, name, block.vectors, y, inputs) for spec in embedding]
        if opt.wants("new_cluster") and name in frozen.clusters:
            for res in cluster_results(
                frozen.clusters[name],
                y,
                rng=rng,
                min_samples=opt.cluster_min_samples,
                **opt.cluster_kwargs,
            ):
                out.append(res.with_context(feature=name))
    out += prompt_mix_results(ref, cur, inputs)
    out += conditional_results(ref, cur, inputs)
    out += aggregate_results(ref, cur, inputs)
    if (
        opt.wants(NGRAMS)
        and INSTRUCTION_WORDS in ref.word_sets
        and INSTRUCTION_WORDS in cur.word_sets
    ):
        r, c = ref.word_sets[INSTRUCTION_WORDS], cur.word_sets[INSTRUCTION_WORDS]
        out.append(run_test(get_test(NGRAMS), INSTRUCTION_WORDS, r, c, inputs))
    return out


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
