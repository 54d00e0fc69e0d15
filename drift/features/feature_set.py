"""Features from logged sample records (the sample record's fields), one aligned row per sample.

Numeric: prompt_chars, response_chars, prompt_tokens, completion_tokens, tools_count,
latency_ms, ttft_ms, tpot_ms, queue_ms, mean_logprob, mean_entropy, and every eval score
(`eval_score`, `eval_<name>`). Categorical: finish_reason, and `tool` (multi-valued: one value
per tool named). Embeddings: prompt_embedding / response_embedding, kept as (row indices,
matrix) blocks because the sidecar embeds only some rows. `sample_weight` is kept as the row
weights (drift.features.weights). Word sets (`word_sets`: one tuple of strings per row) hold what is
tested as sets, the prompts' instruction n-grams (added by drift.features.prompt_features). Missing
columns are simply absent; missing values are NaN / None.

Bad input is an InputError naming the row and field (mixed vector dimensions, a non-positive
weight). What can be read is read: an empty vector or one holding NaN/inf counts as "not
embedded", numbers that do not parse are missing, and text is made UTF-8-safe (lone surrogates
become U+FFFD) so labels built from it can be printed and stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from drift.errors import InputError
from drift.features.codec import decode_array, encode_array
from drift.formatting import clean_text

RAW_NUMERIC = (
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "ttft_ms",
    "tpot_ms",
    "queue_ms",
    "mean_logprob",
    "mean_entropy",
)
SEGMENT_KEYS = ("tenant", "segment", "prompt_version", "model_version")
EMBEDDING_FIELDS = ("prompt_embedding", "response_embedding")
MULTI_VALUED = frozenset({"tool"})
NO_TOOL = "(none)"


@dataclass
class EmbeddingBlock:
    rows: np.ndarray  # int64 indices into the FeatureSet's rows, ascending
    vectors: np.ndarray  # (len(rows), dim) float32

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1]) if self.vectors.ndim == 2 else 0


@dataclass
class FeatureSet:
    n: int
    numeric: dict[str, np.ndarray] = field(default_factory=dict)
    categorical: dict[str, np.ndarray] = field(default_factory=dict)
    embeddings: dict[str, EmbeddingBlock] = field(default_factory=dict)
    keys: dict[str, np.ndarray] = field(default_factory=dict)
    timestamps: np.ndarray | None = None  # epoch seconds
    weights: np.ndarray | None = (
        None  # sample_weight = 1 / sampling probability (drift.features.weights)
    )
    # one tuple of strings per row (instruction n-grams: drift.features.instruction_words), tested
    # as sets
    word_sets: dict[str, np.ndarray] = field(default_factory=dict)

    def take(self, idx: np.ndarray) -> FeatureSet:
        """The rows at `idx` (in that order), embeddings remapped."""
        idx = np.asarray(idx, dtype=np.int64)
        newpos = np.full(self.n, -1, dtype=np.int64)
        newpos[idx] = np.arange(idx.size)
        blocks = {}
        for name, b in self.embeddings.items():
            pos = newpos[b.rows]
            keep = pos >= 0
            order = np.argsort(pos[keep], kind="stable")
            blocks[name] = EmbeddingBlock(pos[keep][order], b.vectors[keep][order])
        return FeatureSet(
            n=int(idx.size),
            numeric={k: v[idx] for k, v in self.numeric.items()},
            categorical={k: v[idx] for k, v in self.categorical.items()},
            embeddings=blocks,
            keys={k: v[idx] for k, v in self.keys.items()},
            timestamps=None if self.timestamps is None else self.timestamps[idx],
            weights=None if self.weights is None else self.weights[idx],
            word_sets={k: v[idx] for k, v in self.word_sets.items()},
        )

    def categorical_values(self, name: str) -> np.ndarray:
        """One value per row, or for multi-valued features one value per item (NO_TOOL if none)."""
        values = self.categorical[name]
        if name not in MULTI_VALUED:
            return values
        flat = [item for row in values for item in (row if row else (NO_TOOL,))]
        return np.asarray(flat, dtype=object)

    def eval_names(self) -> list[str]:
        return [k for k in self.numeric if k.startswith("eval_")]

    def time_order(self) -> np.ndarray:
        """Row order by timestamp (stable: ties and missing timestamps keep file order)."""
        if self.timestamps is None:
            return np.arange(self.n)
        ts = np.where(np.isnan(self.timestamps), np.inf, self.timestamps)
        return np.argsort(ts, kind="stable")

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "numeric": {k: encode_array(v) for k, v in self.numeric.items()},
            "categorical": {k: encode_array(v) for k, v in self.categorical.items()},
            "embeddings": {
                k: {"rows": encode_array(b.rows), "vectors": encode_array(b.vectors)}
                for k, b in self.embeddings.items()
            },
            "keys": {k: encode_array(v) for k, v in self.keys.items()},
            "timestamps": None if self.timestamps is None else encode_array(self.timestamps),
            "weights": None if self.weights is None else encode_array(self.weights),
            "word_sets": {k: encode_array(v) for k, v in self.word_sets.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeatureSet:
        return cls(
            n=int(data["n"]),
            numeric={k: decode_array(v) for k, v in data["numeric"].items()},
            categorical={k: decode_array(v) for k, v in data["categorical"].items()},
            embeddings={
                k: EmbeddingBlock(decode_array(v["rows"]), decode_array(v["vectors"]))
                for k, v in data["embeddings"].items()
            },
            keys={k: decode_array(v) for k, v in data["keys"].items()},
            timestamps=None if data.get("timestamps") is None else decode_array(data["timestamps"]),
            weights=None if data.get("weights") is None else decode_array(data["weights"]),
            word_sets={k: decode_array(v) for k, v in (data.get("word_sets") or {}).items()},
        )


def _numeric(col: pd.Series) -> np.ndarray:
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _lengths(col: pd.Series) -> np.ndarray:
    return np.fromiter(
        (len(v) if isinstance(v, str) else np.nan for v in col), dtype=np.float64, count=len(col)
    )


def _labels(col: pd.Series) -> np.ndarray:
    """Category / segment values as UTF-8-safe strings, None where missing."""
    return col.map(lambda v: None if _is_missing(v) else clean_text(v)).to_numpy(dtype=object)


def _is_missing(value: object) -> bool:
    return (
        value is None
        or value is pd.NA
        or value is pd.NaT
        or (isinstance(value, float) and np.isnan(value))
    )


def _timestamps(col: pd.Series) -> np.ndarray:
    """Epoch seconds from numbers or RFC 3339 strings (NaN where unparseable)."""
    nums = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    text = col.where(pd.isna(nums) & col.map(lambda v: isinstance(v, str)))
    if text.notna().any():
        parsed = pd.to_datetime(text, utc=True, errors="coerce", format="ISO8601")
        secs = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=np.float64)
        nums = np.where(np.isnan(nums), secs, nums)
    return nums


def sample_weights(col: pd.Series) -> np.ndarray:
    """`sample_weight` as floats; a missing value is 1.0 (storage's default), a non-positive or
    non-finite one is an InputError naming the row."""
    w = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    w = np.where(col.isna().to_numpy(), 1.0, w)
    bad = np.flatnonzero(~(np.isfinite(w) & (w > 0)))
    if bad.size:
        raise InputError(
            f"row {int(bad[0])}: sample_weight must be a finite number > 0, "
            f"got {col.iloc[int(bad[0])]!r}"
        )
    return w


def _vector(value: object, row: int, name: object) -> np.ndarray | None:
    """A row's embedding as float32, None when it has none (missing, empty, NaN/inf inside)."""
    if value is None or isinstance(value, str | bytes) or np.ndim(value) == 0:  # type: ignore[arg-type]
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return None
        raise InputError(f"row {row}: {name} is not a list of numbers ({type(value).__name__})")
    try:
        with np.errstate(over="ignore"):  # a huge value becomes inf: then it has no vector
            vec = np.asarray(value, dtype=np.float32).ravel()
    except (TypeError, ValueError):
        raise InputError(f"row {row}: {name} is not a list of numbers") from None
    return vec if vec.size and np.isfinite(vec).all() else None


def embedding_block(col: pd.Series) -> EmbeddingBlock | None:
    """Rows whose value is a usable vector; InputError names the first row whose length differs."""
    rows, vecs = [], []
    for i, v in enumerate(col):
        vec = _vector(v, i, col.name)
        if vec is not None:
            rows.append(i)
            vecs.append(vec)
    if not rows:
        return None
    dim = vecs[0].size
    for i, v in zip(rows, vecs, strict=True):
        if v.size != dim:
            raise InputError(f"row {i}: {col.name} has {v.size} values, row {rows[0]} has {dim}")
    return EmbeddingBlock(np.asarray(rows, dtype=np.int64), np.vstack(vecs))


def extract_features(
    frame: pd.DataFrame, embeddings: dict[str, EmbeddingBlock] | None = None
) -> FeatureSet:
    """Features of every row of `frame`; `embeddings` (by field name) override frame columns."""
    fs = FeatureSet(n=len(frame))
    cols = frame.columns
    if "prompt" in cols:
        fs.numeric["prompt_chars"] = _lengths(frame["prompt"])
    if "response" in cols:
        fs.numeric["response_chars"] = _lengths(frame["response"])
    for name in RAW_NUMERIC:
        if name in cols:
            fs.numeric[name] = _numeric(frame[name])
    if "tools" in cols:
        tools = frame["tools"].map(
            lambda v: (
                tuple(clean_text(t) for t in v) if isinstance(v, (list, tuple, np.ndarray)) else ()
            )
        )
        fs.numeric["tools_count"] = tools.map(len).to_numpy(dtype=np.float64)
        # element-wise: np.asarray turns equal-length tuples (e.g. all empty) into a 2-D array
        tool_rows = np.empty(len(tools), dtype=object)
        for i, t in enumerate(tools):
            tool_rows[i] = t
        fs.categorical["tool"] = tool_rows
    for name in cols:
        if name == "eval_score" or (isinstance(name, str) and name.startswith("eval_")):
            fs.numeric[clean_text(name)] = _numeric(frame[name])
    if "finish_reason" in cols:
        fs.categorical["finish_reason"] = _labels(frame["finish_reason"])
    for key in SEGMENT_KEYS:
        if key in cols:
            fs.keys[key] = _labels(frame[key])
    if "timestamp" in cols:
        fs.timestamps = _timestamps(frame["timestamp"])
    if "sample_weight" in cols:
        fs.weights = sample_weights(frame["sample_weight"])
    for name in EMBEDDING_FIELDS:
        if embeddings and name in embeddings:
            fs.embeddings[name] = embeddings[name]
        elif name in cols:
            block = embedding_block(frame[name])
            if block is not None:
                fs.embeddings[name] = block
    return fs
