"""The drift job's core: a window against a baseline, whole and per segment, into a report.

`run_drift` runs every test on the whole window ("*") and on each segment (tenant, segment,
prompt version, ...: one label "key=value" per value seen in the window) against the same
segment of the baseline. Segments smaller than `min_segment_size` on either side get one
insufficient result instead of tests. The whole-window tests see both sides thinned to the
population mix by `sample_weight` (drift.weights). Drifted results become proposed alerts
through the rules table (drift.rules). Pure: frames and arrays in, a DriftReport out.
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
from drift.eval_trend import eval_trend_test
from drift.features import EmbeddingBlock, FeatureSet, extract_features
from drift.report import DriftReport, ProposedAlert
from drift.result import ALL, TestResult
from drift.rules import DEFAULT_RULES, Rule
from drift.weights import Population, block_rows_to_original, population_sample, weighting_detail

DEFAULT_SEGMENT_BY = ("tenant", "segment", "prompt_version")
MIN_SEGMENT_SIZE = 50
MAX_SEGMENTS_PER_KEY = 50


def _features(source: pd.DataFrame | FeatureSet, embeddings=None) -> FeatureSet:
    return source if isinstance(source, FeatureSet) else extract_features(source, embeddings)


def segment_rows(fs: FeatureSet, key: str, value: str) -> np.ndarray:
    return np.flatnonzero(fs.keys[key] == value) if key in fs.keys else np.empty(0, np.int64)


def segment_values(fs: FeatureSet, key: str, limit: int) -> list[str]:
    """Values of `key` in the window, most frequent first (at most `limit`)."""
    if key not in fs.keys:
        return []
    vals = [v for v in fs.keys[key] if v is not None]
    uniq, counts = np.unique(np.asarray(vals, dtype=str), return_counts=True) if vals else ([], [])
    order = np.argsort(-np.asarray(counts), kind="stable")
    return [str(uniq[i]) for i in order[:limit]]


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
) -> DriftReport:
    """Every test on the whole window and per segment; proposed alerts from `rules`.

    `weighted` (default): the whole-window ("*") tests run on both sides thinned to the
    population mix by `sample_weight` (drift.weights; a no-op when weights are absent or all
    equal); per-segment tests use the rows as they are (weights within a segment are ~equal).

    `eval_frame`, when given, is the trailing 7 days of eval-scored samples used for the eval
    trend (an hourly window holds too few); otherwise the window's own scores are used.
    """
    started = time.perf_counter()
    opt = options or BatteryOptions()
    cur = _features(current, embeddings)
    ev = None if eval_frame is None else _features(eval_frame)
    if ev is not None:
        opt = replace(opt, tests=tuple(t for t in (opt.tests or _ALL_TESTS) if t != "eval_trend"))
    rng = np.random.default_rng(rng_seed)
    ref = baseline.features
    results: list[TestResult] = []
    sizes: dict[str, dict[str, int]] = {ALL: {"n_current": cur.n, "n_reference": ref.n}}

    # the whole window as the population, not the stratified sample (drift.weights); own
    # seeded streams so `rng` — and so every per-segment result — is untouched by weighting
    ref_pop = baseline.population() if weighted else Population(ref)
    cur_pop = _population(cur, [rng_seed, 2], weighted)
    frozen_all = baseline.frozen
    if ref_pop.applied:  # cluster-growth shares of the population, as for a segment below
        frozen_all = replace(frozen_all, clusters={
            name: model.with_counts(ref_pop.features.embeddings[name].vectors)
            for name, model in frozen_all.clusters.items() if name in ref_pop.features.embeddings})
    whole = run_battery(ref_pop.features, cur_pop.features, frozen=frozen_all,
                        levels=baseline.levels, rng=rng, options=opt,
                        mmd_refs=baseline.mmd_references(opt.mmd_max_samples, ref_pop.applied))
    results += [_weighted(r, weighting_detail(ref_pop, cur_pop), cur, cur_pop) for r in whole]
    if ev is not None:
        ev_pop = _population(ev, [rng_seed, 3], weighted)
        results += [_weighted(r, weighting_detail(ref_pop, ev_pop), ev, ev_pop)
                    for r in _eval_results(ref_pop.features, ev_pop.features, ALL, opt)]
    timings = {"whole_s": time.perf_counter() - started}

    for key in segment_by:
        for value in segment_values(cur, key, max_segments_per_key):
            label = f"{key}={value}"
            cur_rows, ref_rows = segment_rows(cur, key, value), segment_rows(ref, key, value)
            sizes[label] = {"n_current": int(cur_rows.size), "n_reference": int(ref_rows.size)}
            if min(cur_rows.size, ref_rows.size) < min_segment_size:
                results.append(TestResult(
                    "segment_size", None, None, None, False, insufficient=True, feature="*",
                    segment=label, detail={**sizes[label], "min_samples": min_segment_size}))
                continue
            seg_ref, seg_cur = ref.take(ref_rows), cur.take(cur_rows)
            frozen = Frozen(baseline.frozen.psi_edges, baseline.frozen.scales, baseline.frozen.levels,
                            {name: model.with_counts(seg_ref.embeddings[name].vectors)
                             for name, model in baseline.frozen.clusters.items()
                             if name in seg_ref.embeddings})
            seg = run_battery(seg_ref, seg_cur, frozen=frozen, levels=baseline.levels, rng=rng,
                              options=opt)
            results += [r.with_context(segment=label) for r in seg]
            if ev is not None:
                results += _eval_results(seg_ref, ev.take(segment_rows(ev, key, value)), label, opt)
    timings["total_s"] = time.perf_counter() - started
    alerts = attribute_alerts(propose_alerts(results, DEFAULT_RULES if rules is None else rules),
                              results)
    reasons = list((baseline.validation or {}).get("reasons", []))
    if baseline.status == "candidate":
        reasons.append("baseline has not been validated")
    return DriftReport(results=results, alerts=alerts, segments=sizes,
                       baseline_valid=baseline.valid, baseline_reasons=reasons,
                       n_current=cur.n, seed=rng_seed, timings=timings)


_ALL_TESTS = ("psi", "ks", "wasserstein", "chi2", "js", "mmd", "new_cluster", "eval_trend",
              "cluster_mix", "conditional_mmd")


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
            {**c, "representatives": block_rows_to_original(cur, cur_pop, r.feature,
                                                            c["representatives"])}
            for c in detail["clusters"]]
    return replace(r, detail=detail)


def _eval_results(ref: FeatureSet, ev: FeatureSet, label: str, opt: BatteryOptions) -> list[TestResult]:
    return [eval_trend_test(ref.numeric[name], ev.numeric[name], threshold=opt.eval_drop,
                            timestamps=ev.timestamps, alpha=opt.eval_alpha,
                            window_days=opt.eval_window_days, min_samples=opt.eval_min_samples
                            ).with_context(feature=name, segment=label)
            for name in ref.eval_names() if name in ev.numeric]


def _fmt(r: TestResult) -> str:
    if r.test in ("mmd", "ks", "chi2"):
        return f"{r.feature} (p={r.p_value:.3g}, stat={r.statistic:.3g})"
    if r.test == "eval_trend":
        return f"{r.feature} (-{r.statistic:.1%}, p={r.p_value:.3g})"
    if r.test == "new_cluster":
        return f"{r.feature} (new group {r.statistic:.0%} of window)"
    return f"{r.feature} ({r.statistic:.3g} > {r.threshold:.3g})"


def propose_alerts(results: Sequence[TestResult], rules: Sequence[Rule]) -> list[ProposedAlert]:
    """One alert per (rule, segment) over the drifted, sufficient results the rule matches."""
    alerts = []
    for rule in rules:
        by_segment: dict[str, list[TestResult]] = {}
        for r in results:
            if r.drifted and not r.insufficient and rule.matches(r):
                by_segment.setdefault(r.segment, []).append(r)
        for segment, hits in by_segment.items():
            where = "whole window" if segment == ALL else segment
            summary = f"{rule.test} drift on {', '.join(_fmt(h) for h in hits)} [{where}]"
            evidence = {"rule": rule.description, "results": [h.to_dict() for h in hits]}
            alerts.append(ProposedAlert(rule.severity, rule.name, rule.kind, segment, summary, evidence))
    return alerts
