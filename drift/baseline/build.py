"""A baseline: a bounded, frozen copy of "normal" traffic and everything frozen with it.

Life cycle: `build_baseline` (candidate: capped seeded sample, time-ordered; PSI bin edges,
Wasserstein scales, category levels, embedding clusters and prompt templates frozen) →
`validate_baseline` (drift.baseline.validate: first half vs second half must not drift, else
rejected with reasons) →
`calibrate_baseline` (drift.baseline.calibrate: thresholds from the baseline's own window-to-window
noise) → `drift.baseline.power.detectable_effects` (the smallest effect each test detects at the
window size, kept in `power`). `to_dict`/`from_dict` round-trip it through JSON-able values (arrays
as base64) so storage can persist it; `cluster_bytes` is the compact form for the `cluster_model`
column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from drift.baseline.cluster_model import ClusterModel, fit_clusters
from drift.battery_inputs import Frozen, Levels
from drift.features.categories import category_levels
from drift.features.codec import decode_array, encode_array
from drift.features.feature_set import EmbeddingBlock, FeatureSet, extract_features
from drift.features.prompt_features import add_prompt_features
from drift.features.templates import TemplateModel, fit_templates, held_out_unseen
from drift.features.weights import Population, population_sample
from drift.registry import get_test
from drift.result import jsonable
from drift.stattests.mmd import MAX_SAMPLES, MMDReference, prepare_reference
from drift.stattests.psi import psi_edges
from drift.stattests.wasserstein import reference_scale

DEFAULT_MAX_SAMPLES = 100_000
MIN_CLUSTER_POINTS = 50
FORMAT_VERSION = 1


@dataclass
class Baseline:
    features: FeatureSet
    seed: int = 0
    status: str = "candidate"  # candidate | validated | rejected
    rows: np.ndarray | None = None  # source-frame row of each frozen row (for baseline_samples)
    frozen: Frozen = field(default_factory=Frozen)
    levels: Levels = field(default_factory=Levels)
    validation: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    power: dict[str, Any] | None = (
        None  # drift.baseline.power.PowerReport.to_dict(): detectable effects
    )
    info: dict[str, Any] = field(default_factory=dict)
    _mmd: dict[str, MMDReference] = field(default_factory=dict, repr=False, compare=False)
    _population: Population | None = field(default=None, repr=False, compare=False)

    @property
    def n(self) -> int:
        return self.features.n

    @property
    def valid(self) -> bool:
        return self.status == "validated"

    def population(self) -> Population:
        """The frozen rows thinned to the population mix by their sample weights
        (drift.features.weights), seeded per baseline and built once; the rows as they are when
        unweighted."""
        if self._population is None:
            rng = np.random.default_rng([self.seed, 3])  # its own stream (validation uses 2)
            self._population = population_sample(self.features, rng)
        return self._population

    def mmd_reference(
        self, name: str, max_samples: int = MAX_SAMPLES, population: bool = False
    ) -> MMDReference | None:
        """The frozen MMD reference (seeded subsample + bandwidth + cached kernel), built once;
        `population`: of the weight-thinned rows (`population()`)."""
        population = population and self.population().applied
        key = f"{name}:{max_samples}" + (":population" if population else "")
        if key not in self._mmd:
            fs = self.population().features if population else self.features
            block = fs.embeddings.get(name)
            if block is None:
                return None
            rng = np.random.default_rng([self.seed, 1, max_samples])  # deterministic per baseline
            self._mmd[key] = prepare_reference(block.vectors, rng=rng, max_samples=max_samples)
        return self._mmd[key]

    def mmd_references(
        self, max_samples: int = MAX_SAMPLES, population: bool = False
    ) -> dict[str, MMDReference]:
        refs = {
            name: self.mmd_reference(name, max_samples, population)
            for name in self.features.embeddings
        }
        return {k: v for k, v in refs.items() if v is not None}

    def threshold(self, test: str, feature: str) -> float:
        return self.levels.threshold(test, feature, get_test(test).default_threshold)

    def cluster_bytes(self) -> dict[str, bytes]:
        return {name: model.to_bytes() for name, model in self.frozen.clusters.items()}

    def to_dict(self, include_features: bool = True) -> dict[str, Any]:
        """JSON-able. With include_features=False, pass the samples back to from_dict."""
        fz = self.frozen
        out = {
            "format": FORMAT_VERSION,
            "seed": self.seed,
            "status": self.status,
            "n": self.n,
            "psi_edges": {k: v.tolist() for k, v in fz.psi_edges.items()},
            "scales": dict(fz.scales),
            "levels": {k: list(v) for k, v in fz.levels.items()},
            "clusters": {
                k: encode_array(np.frombuffer(m.to_bytes(), dtype=np.uint8))
                for k, m in fz.clusters.items()
            },
            "templates": None if fz.templates is None else fz.templates.to_dict(),
            "thresholds": self.levels.thresholds,
            "effect_floors": self.levels.effect_floors,
            "min_samples": self.levels.min_samples,
            "validation": self.validation,
            "calibration": self.calibration,
            "power": self.power,
            "info": self.info,
        }
        out = jsonable(out)
        out["rows"] = None if self.rows is None else encode_array(self.rows)
        if include_features:  # already JSON-able (base64 strings), kept out of jsonable's walk
            out["features"] = self.features.to_dict()
        return out

    @classmethod
    def from_dict(
        cls,
        data: dict[str, Any],
        features: FeatureSet | pd.DataFrame | None = None,
        embeddings: dict[str, EmbeddingBlock] | None = None,
    ) -> Baseline:
        """Rebuild; `features` (or a frame of the frozen records + `embeddings`) must be in the
        frozen order — the order of `rows`, i.e. time order — when the dict was made without."""
        if data.get("format") != FORMAT_VERSION:
            raise ValueError(f"baseline format {data.get('format')!r} is not {FORMAT_VERSION}")
        if features is None:
            if "features" not in data:
                raise ValueError("baseline dict holds no features: pass the frozen samples")
            features = FeatureSet.from_dict(data["features"])
        templates = data.get("templates")
        model = None if templates is None else TemplateModel.from_dict(templates)
        if isinstance(features, pd.DataFrame):
            frame = features
            features = extract_features(frame, embeddings)
            if model is not None and "prompt" in frame.columns:
                add_prompt_features(features, frame["prompt"].tolist(), model)
        if features.n != data["n"]:
            raise ValueError(f"baseline has {data['n']} samples, {features.n} were given")
        frozen = Frozen(
            psi_edges={k: np.asarray(v, dtype=np.float64) for k, v in data["psi_edges"].items()},
            scales={k: float(v) for k, v in data["scales"].items()},
            levels={k: list(v) for k, v in data["levels"].items()},
            clusters={
                k: ClusterModel.from_bytes(decode_array(v).tobytes())
                for k, v in data["clusters"].items()
            },
            templates=model,
        )
        levels = Levels(
            thresholds=data.get("thresholds") or {},
            effect_floors=data.get("effect_floors") or {},
            min_samples=data.get("min_samples") or {},
        )
        rows = data.get("rows")
        return cls(
            features=features,
            seed=int(data["seed"]),
            status=data["status"],
            rows=None if rows is None else decode_array(rows),
            frozen=frozen,
            levels=levels,
            validation=data.get("validation"),
            calibration=data.get("calibration"),
            power=data.get("power"),
            info=data.get("info") or {},
        )


def freeze(features: FeatureSet, rng: np.random.Generator, cluster: bool = True) -> Frozen:
    """Bin edges, scales, levels and clusters of a feature set."""
    fz = Frozen()
    for name, values in features.numeric.items():
        fz.psi_edges[name] = psi_edges(values)
        fz.scales[name] = reference_scale(values)
    for name in features.categorical:
        fz.levels[name] = category_levels(features.categorical_values(name))
    if cluster:
        for name, block in features.embeddings.items():
            if len(block.vectors) >= MIN_CLUSTER_POINTS:
                fz.clusters[name] = fit_clusters(block.vectors, rng=rng)
    return fz


def build_baseline(
    source: pd.DataFrame | FeatureSet,
    *,
    max_samples: int = DEFAULT_MAX_SAMPLES,
    seed: int = 0,
    embeddings: dict[str, EmbeddingBlock] | None = None,
    cluster: bool = True,
    templates: bool = True,
) -> Baseline:
    """A candidate baseline from a frame of sample records (or features): at most `max_samples`
    rows (a seeded uniform sample when there are more), ordered by time, everything frozen;
    `templates`: mine the prompts' templates (drift.features.templates) when the frame has
    prompts."""
    if max_samples < 1:
        raise ValueError(f"max_samples must be positive, got {max_samples}")
    fs = source if isinstance(source, FeatureSet) else extract_features(source, embeddings)
    rng = np.random.default_rng(seed)
    rows = np.arange(fs.n)
    if fs.n > max_samples:
        rows = np.sort(rng.choice(fs.n, max_samples, replace=False))
    fs_capped = fs.take(rows)
    order = fs_capped.time_order()
    fs_capped, rows = fs_capped.take(order), rows[order]
    model = None
    if templates and isinstance(source, pd.DataFrame) and "prompt" in source.columns:
        prompts = source["prompt"].to_numpy(dtype=object)[rows].tolist()
        texts = [p if isinstance(p, str) else "" for p in prompts]
        model = fit_templates(texts)
        model.held_out = held_out_unseen(texts, seed=seed)
        add_prompt_features(fs_capped, prompts, model)
    ts = fs_capped.timestamps
    info = {
        "n_source": int(fs.n),
        "capped": bool(fs.n > max_samples),
        "max_samples": max_samples,
        "window_start": None if ts is None or not np.isfinite(ts).any() else float(np.nanmin(ts)),
        "window_end": None if ts is None or not np.isfinite(ts).any() else float(np.nanmax(ts)),
    }
    frozen = freeze(fs_capped, rng, cluster=cluster)
    frozen.templates = model
    return Baseline(features=fs_capped, seed=seed, rows=rows, frozen=frozen, info=info)
