"""Arrays <-> JSON-able values, so a baseline can be stored in a JSON column (or as bytes)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np


def encode_array(arr: np.ndarray) -> dict[str, Any]:
    """Numeric arrays as base64 of little-endian bytes; object arrays as plain lists."""
    arr = np.asarray(arr)
    if arr.dtype == object:
        return {"object": [list(v) if isinstance(v, tuple) else v for v in arr.tolist()]}
    le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    return {
        "dtype": le.dtype.str,
        "shape": list(arr.shape),
        "b64": base64.b64encode(np.ascontiguousarray(le).tobytes()).decode("ascii"),
    }


def decode_array(data: dict[str, Any]) -> np.ndarray:
    if "object" in data:
        out = np.empty(len(data["object"]), dtype=object)
        for i, v in enumerate(data["object"]):
            out[i] = tuple(v) if isinstance(v, list) else v
        return out
    raw = base64.b64decode(data["b64"])
    return np.frombuffer(raw, dtype=np.dtype(data["dtype"])).reshape(data["shape"]).copy()
