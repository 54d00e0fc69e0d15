"""The drift job's core: a window against a baseline, whole and per segment, into an outcome.

`run_drift` runs every test on the whole window ("*") and on each segment (tenant, segment,
prompt version, ...: one label "key=value" per value seen in the window) against the same
segment of the baseline. Segments smaller than `min_segment_size` on either side get one
insufficient result instead of tests. The whole-window tests see both sides thinned to the
population mix by `sample_weight` (drift.weights). Drifted results become proposed alerts
through the rules table (drift.proposals). Pure: frames and arrays in, a DriftOutcome out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from drift.attribution import attribute_alerts
from drift.baseline import Baseline
from drift.battery import BatteryOptions, Frozen, run_battery
from drift.custom_rules import DEFAULT_RULES, Rule
from drift.errors import InputError
from drift.eval_trend import eval_trend_test
from drift.features import MULTI_VALUED, EmbeddingBlock, FeatureSet, extract_features
from drift.new_values import new_values_test
from drift.outcome import DriftOutcome
from drift.prompt_features import (
    NEW_TEMPLATE,
    PROMPT_TEMPLATE,
    add_prompt_features,
    new_template_result,
)
from drift.proposals import propose_alerts
from drift.result import ALL, TestResult
from drift.segments import (
    DEFAULT_SEGMENT_BY,
    MAX_SEGMENTS_PER_KEY,
    MIN_SEGMENT_SIZE,
    segment_rows,
    segment_values,
)
from drift.stattests.instruction_ngrams import NAME as NGRAMS
from drift.weights import Population, block_rows_to_original, population_sample, weighting_detail
from drift.window_evidence import WindowEvidence, accumulate


def _features(source: pd.DataFrame | FeatureSet, embeddings=None) -> FeatureSet:
    return source if isinstance(source, FeatureSet) else extract_features(source, embeddings)


def run_drift(
    baseline: Baseline,
    current: pd.DataFrame | FeatureSet,
    *,
    segment_by: Sequence[str] = DEFAULT_SEGMENT_BY,
    rng_seed: int = 0,
    rules: Sequence[Rule] | None = None,
    embeddings: dict[str, EmbeddingBlock] | None = None,
    eval_frame: pd.DataFrame | FeatureSet | None = None,
    options: BatteryOptions | None = None,
    min_segment_size: int = MIN_SEGMENT_SIZE,
    max_segments_per_key: int = MAX_SEGMENTS_PER_KEY,
    weighted: bool = True,
    evidence: WindowEvidence | None = None,
) -> DriftOutcome:
    """Every test on the whole window and per segment; proposed alerts from `rules`.

    `weighted` (default): the whole-window ("*") tests run on both sides thinned to the
    population mix by `sample_weight` (drift.weights; a no-op when weights are absent or all
    equal); per-segment tests use the rows as they are (weights within a segment are ~equal).

    `eval_frame`, when given, is the trailing 7 days of eval-scored samples used for the eval
    trend (an hourly window holds too few); otherwise the window's own scores are used.

    `evidence` (drift.window_evidence), when given, takes the whole window's `response_agg`
    p-value (updated in place) and adds its `response_evidence` result: drifted when the
    responses' evidence summed over recent windows passes its calibrated level.
    """
    started = time.perf_counter()
    opt = options or BatteryOptions()
    cur = _features(current, embeddings)
    model = baseline.frozen.templates
    prompts = (
        current["prompt"].tolist()
        if isinstance(current, pd.DataFrame) and "prompt" in current.columns
        else None
    )
    if model is not None and prompts is not None:
        add_prompt_features(cur, prompts, model)
    ev = None if eval_frame is None else _features(eval_frame)
    if ev is not None:
        opt = replace(opt, tests=tuple(t for t in (opt.tests or _ALL_TESTS) if t != "eval_trend"))
    rng = np.random.default_rng(rng_seed)
    ref = baseline.features
    check_dimensions(ref, cur)
    results: list[TestResult] = []
    sizes: dict[str, dict[str, int]] = {ALL: {"n_current": cur.n, "n_reference": ref.n}}

    # the whole window as the population, not the stratified sample (drift.weights); own
    # seeded streams so `rng` — and so every per-segment result — is untouched by weighting
    ref_pop = baseline.population() if weighted else Population(ref)
    cur_pop = _population(cur, [rng_seed, 2], weighted)
    frozen_all = baseline.frozen
    if ref_pop.applied:  # cluster-growth shares of the population, as for a segment below
        frozen_all = replace(
            frozen_all,
            clusters={
                name: model.with_counts(ref_pop.features.embeddings[name].vectors)
                for name, model in frozen_all.clusters.items()
                if name in ref_pop.features.embeddings
            },
        )
    whole = run_battery(
        ref_pop.features,
        cur_pop.features,
        frozen=frozen_all,
        levels=baseline.levels,
        rng=rng,
        options=opt,
        mmd_refs=baseline.mmd_references(opt.mmd_max_samples, ref_pop.applied),
    )
    results += [_weighted(r, weighting_detail(ref_pop, cur_pop), cur, cur_pop) for r in whole]
    if ev is not None:
        ev_pop = _population(ev, [rng_seed, 3], weighted)
        results += [
            _weighted(r, weighting_detail(ref_pop, ev_pop), ev, ev_pop)
            for r in _eval_results(ref_pop.features, ev_pop.features, ALL, opt)
        ]
    if opt.wants("new_category"):
        results += new_category_results(ref, cur)
    if opt.wants(NEW_TEMPLATE) and prompts is not None and PROMPT_TEMPLATE in cur.categorical:
        held_out = None if model is None else model.held_out
        results.append(
            new_template_result(cur.categorical[PROMPT_TEMPLATE], prompts, held_out=held_out)
        )
    timings = {"whole_s": time.perf_counter() - started}

    for key in segment_by:
        for value in segment_values(cur, key, max_segments_per_key):
            label = f"{key}={value}"
            cur_rows, ref_rows = segment_rows(cur, key, value), segment_rows(ref, key, value)
            sizes[label] = {"n_current": int(cur_rows.size), "n_reference": int(ref_rows.size)}
            if min(cur_rows.size, ref_rows.size) < min_segment_size:
                results.append(
                    TestResult(
                        "segment_size",
                        None,
                        None,
                        None,
                        False,
                        insufficient=True,
                        feature="*",
                        segment=label,
                        detail={**sizes[label], "min_samples": min_segment_size},
                    )
                )
                continue
            seg_ref, seg_cur = ref.take(ref_rows), cur.take(cur_rows)
            frozen = Frozen(
                baseline.frozen.psi_edges,
                baseline.frozen.scales,
                baseline.frozen.levels,
                {
                    name: model.with_counts(seg_ref.embeddings[name].vectors)
                    for name, model in baseline.frozen.clusters.items()
                    if name in seg_ref.embeddings
                },
            )
            seg = run_battery(
                seg_ref, seg_cur, frozen=frozen, levels=baseline.levels, rng=rng, options=opt
            )
            results += [r.with_context(segment=label) for r in seg]
            if ev is not None:
                results += _eval_results(seg_ref, ev.take(segment_rows(ev, key, value)), label, opt)
    timings["total_s"] = time.perf_counter() - started
    results = [_finite_or_not_drifted(r) for r in results]
    if evidence is not None:
        results += accumulate(evidence, results)
    alerts = attribute_alerts(
        propose_alerts(results, DEFAULT_RULES if rules is None else rules, sizes), results
    )
    reasons = list((baseline.validation or {}).get("reasons", []))
    if baseline.status == "candidate":
        reasons.append("baseline has not been validated")
    return DriftOutcome(
        results=results,
        alerts=alerts,
        segments=sizes,
        baseline_valid=baseline.valid,
        baseline_reasons=reasons,
        n_current=cur.n,
        seed=rng_seed,
        timings=timings,
    )


_ALL_TESTS = (
    "psi",
    "ks",
    "wasserstein",
    "chi2",
    "js",
    "mmd",
    "new_cluster",
    "eval_trend",
    "new_category",
    "cluster_mix",
    "conditional_mmd",
    "response_agg",
    NEW_TEMPLATE,
    NGRAMS,
)


def new_category_results(ref: FeatureSet, cur: FeatureSet) -> list[TestResult]:
    """New values of every segment key and categorical feature the reference also has, on the
    whole window (shares by sample weight; per item for multi-valued features). Templates have
    their own check (drift.prompt_features.new_template_result), which names the wording."""
    out = []
    for name in [k for k in cur.keys if k in ref.keys]:
        out.append(
            new_values_test(ref.keys[name], cur.keys[name], weights=cur.weights).with_context(
                feature=name, segment=ALL
            )
        )
    for name in [k for k in cur.categorical if k in ref.categorical and k != PROMPT_TEMPLATE]:
        weights = None if name in MULTI_VALUED else cur.weights
        out.append(
            new_values_test(
                ref.categorical_values(name), cur.categorical_values(name), weights=weights
            ).with_context(feature=name, segment=ALL)
        )
    return out


def check_dimensions(ref: FeatureSet, cur: FeatureSet) -> None:
    """Window and baseline vectors of one field must have one dimension (else nothing compares)."""
    for name, block in cur.embeddings.items():
        other = ref.embeddings.get(name)
        if other is not None and block.dim != other.dim:
            raise InputError(
                f"{name}: the window's vectors have {block.dim} values, the "
                f"baseline's have {other.dim} (embedded by another model?)"
            )


def _finite_or_not_drifted(r: TestResult) -> TestResult:
    """A drifted result needs a number to stand on: one whose statistic came out NaN/inf
    (overflowing input) is kept, marked, and never raises an alert."""
    if not r.drifted or (r.statistic is not None and np.isfinite(r.statistic)):
        return r
    return replace(r, drifted=False, detail={**r.detail, "not_drifted": "statistic is not finite"})


def _population(fs: FeatureSet, seed: list[int], weighted: bool) -> Population:
    return population_sample(fs, np.random.default_rng(seed)) if weighted else Population(fs)


def _weighted(r: TestResult, wdetail: dict, cur: FeatureSet, cur_pop: Population) -> TestResult:
    """A "*" result with the weighting recorded, new-cluster representatives mapped back to
    the window's own embedding rows."""
    r = r.with_context(segment=ALL)
    if not wdetail:
        return r
    detail = {**r.detail, **wdetail}
    if r.test == "new_cluster" and cur_pop.applied and detail.get("clusters"):
        detail["clusters"] = [
            {
                **c,
                "representatives": block_rows_to_original(
                    cur, cur_pop, r.feature, c["representatives"]
                ),
            }
            for c in detail["clusters"]
        ]
    return replace(r, detail=detail)


def _eval_results(
    ref: FeatureSet, ev: FeatureSet, label: str, opt: BatteryOptions
) -> list[TestResult]:
    return [
        eval_trend_test(
            ref.numeric[name],
            ev.numeric[name],
            threshold=opt.eval_drop,
            timestamps=ev.timestamps,
            alpha=opt.eval_alpha,
            window_days=opt.eval_window_days,
            min_samples=opt.eval_min_samples,
        ).with_context(feature=name, segment=label)
        for name in ref.eval_names()
        if name in ev.numeric
    ]
