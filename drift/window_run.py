"""One drift run's state: the window's features, the eval frame, the sizes per segment, and
the battery calls on the whole window and on one segment (drift.run.run_drift drives it).

Which tests run where is the registry's (drift.registry `scope`): "pair" tests on the whole
window and every segment, "eval" tests there too unless an eval frame is given (then on that
frame), "window" tests on the whole window's unthinned rows only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from drift.baseline.build import Baseline
from drift.battery import PAIR_SCOPES, BatteryOptions, Frozen, run_battery
from drift.errors import InputError
from drift.features.feature_set import EmbeddingBlock, FeatureSet, extract_features
from drift.features.prompt_features import add_prompt_features
from drift.features.segments import segment_rows
from drift.features.weights import (
    Population,
    block_rows_to_original,
    population_sample,
    weighting_detail,
)
from drift.registry import Scope
from drift.result import ALL, TestResult


def features_of(source: pd.DataFrame | FeatureSet, embeddings=None) -> FeatureSet:
    return source if isinstance(source, FeatureSet) else extract_features(source, embeddings)


class WindowRun:
    def __init__(
        self,
        baseline: Baseline,
        current: pd.DataFrame | FeatureSet,
        embeddings: dict[str, EmbeddingBlock] | None,
        eval_frame: pd.DataFrame | FeatureSet | None,
        options: BatteryOptions | None,
        seed: int,
        weighted: bool,
    ) -> None:
        self.baseline, self.seed, self.weighted = baseline, seed, weighted
        self.opt = options or BatteryOptions()
        self.cur = features_of(current, embeddings)
        model = baseline.frozen.templates
        self.prompts: list | None = (
            current["prompt"].tolist()
            if isinstance(current, pd.DataFrame) and "prompt" in current.columns
            else None
        )
        if model is not None and self.prompts is not None:
            add_prompt_features(self.cur, self.prompts, model)
        self.ev = None if eval_frame is None else features_of(eval_frame)
        # with an eval frame the eval-scope tests read it instead of the window
        self.scopes: Sequence[Scope] = ("pair",) if self.ev is not None else PAIR_SCOPES
        self.rng = np.random.default_rng(seed)
        self.ref = baseline.features
        check_dimensions(self.ref, self.cur)
        self.sizes: dict[str, dict[str, int]] = {
            ALL: {"n_current": self.cur.n, "n_reference": self.ref.n}
        }

    def whole_window(self) -> list[TestResult]:
        """The whole window as the population, not the stratified sample (drift.features.weights);
        own seeded streams so `rng`, and so every per-segment result, is untouched by weighting."""
        b, opt = self.baseline, self.opt
        ref_pop = b.population() if self.weighted else Population(self.ref)
        cur_pop = _population(self.cur, [self.seed, 2], self.weighted)
        frozen = b.frozen
        if ref_pop.applied:  # cluster-growth shares of the population, as for a segment
            frozen = replace(frozen, clusters=_clusters_of(frozen, ref_pop.features))
        whole = run_battery(
            ref_pop.features,
            cur_pop.features,
            frozen=frozen,
            levels=b.levels,
            rng=self.rng,
            options=opt,
            mmd_refs=b.mmd_references(opt.mmd_max_samples, ref_pop.applied),
            scopes=self.scopes,
        )
        results = [
            _weighted(r, weighting_detail(ref_pop, cur_pop), self.cur, cur_pop) for r in whole
        ]
        if self.ev is not None:
            ev_pop = _population(self.ev, [self.seed, 3], self.weighted)
            on_eval = self._battery(ref_pop.features, ev_pop.features, frozen, ("eval",))
            results += [
                _weighted(r, weighting_detail(ref_pop, ev_pop), self.ev, ev_pop) for r in on_eval
            ]
        on_window = self._battery(self.ref, self.cur, b.frozen, ("window",), prompts=self.prompts)
        return results + [r.with_context(segment=ALL) for r in on_window]

    def segment(self, key: str, value: str, min_size: int) -> list[TestResult]:
        """Every test on one segment of both sides, or one insufficient result when small."""
        label = f"{key}={value}"
        cur_rows, ref_rows = segment_rows(self.cur, key, value), segment_rows(self.ref, key, value)
        self.sizes[label] = {"n_current": int(cur_rows.size), "n_reference": int(ref_rows.size)}
        if min(cur_rows.size, ref_rows.size) < min_size:
            return [
                TestResult(
                    "segment_size",
                    None,
                    None,
                    None,
                    False,
                    insufficient=True,
                    feature="*",
                    segment=label,
                    detail={**self.sizes[label], "min_samples": min_size},
                )
            ]
        seg_ref, seg_cur = self.ref.take(ref_rows), self.cur.take(cur_rows)
        f = self.baseline.frozen
        frozen = Frozen(f.psi_edges, f.scales, f.levels, _clusters_of(f, seg_ref))
        out = self._battery(seg_ref, seg_cur, frozen, self.scopes)
        if self.ev is not None:
            seg_ev = self.ev.take(segment_rows(self.ev, key, value))
            out += self._battery(seg_ref, seg_ev, frozen, ("eval",))
        return [r.with_context(segment=label) for r in out]

    def _battery(
        self,
        ref: FeatureSet,
        cur: FeatureSet,
        frozen: Frozen,
        scopes: Sequence[Scope],
        prompts: Sequence[object] | None = None,
    ) -> list[TestResult]:
        return run_battery(
            ref,
            cur,
            frozen=frozen,
            levels=self.baseline.levels,
            rng=self.rng,
            options=self.opt,
            scopes=scopes,
            prompts=prompts,
        )


def _clusters_of(frozen: Frozen, ref: FeatureSet) -> dict:
    """The frozen cluster models with their counts taken from `ref` (a segment, a population)."""
    return {
        name: model.with_counts(ref.embeddings[name].vectors)
        for name, model in frozen.clusters.items()
        if name in ref.embeddings
    }


def check_dimensions(ref: FeatureSet, cur: FeatureSet) -> None:
    """Window and baseline vectors of one field must have one dimension (else nothing compares)."""
    for name, block in cur.embeddings.items():
        other = ref.embeddings.get(name)
        if other is not None and block.dim != other.dim:
            raise InputError(
                f"{name}: the window's vectors have {block.dim} values, the "
                f"baseline's have {other.dim} (embedded by another model?)"
            )


def _population(fs: FeatureSet, seed: list[int], weighted: bool) -> Population:
    return population_sample(fs, np.random.default_rng(seed)) if weighted else Population(fs)


def _weighted(r: TestResult, wdetail: dict, cur: FeatureSet, cur_pop: Population) -> TestResult:
    """A "*" result with the weighting recorded, new-cluster representatives mapped back to
    the window's own embedding rows."""
    r = r.with_context(segment=ALL)
    if not wdetail:
        return r
    detail = {**r.detail, **wdetail}
    if cur_pop.applied and _has_representatives(detail.get("clusters")):
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


def _has_representatives(clusters: object) -> bool:
    """A detail listing clusters with representative rows (the new-cluster check's)."""
    return (
        isinstance(clusters, list)
        and bool(clusters)
        and all(isinstance(c, dict) and "representatives" in c for c in clusters)
    )
