"""OTLP `AnyValue`s as plain Python values, and the first usable value among several names."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

MAX_DEPTH = 16  # what a sample record keeps of nested values (vigil.sample_record.extras)


def plain(value: Any, depth: int = 0) -> Any:
    """An `AnyValue` -> str, bool, int, float, bytes, list or dict (None when unset)."""
    kind = value.WhichOneof("value")
    if kind is None or depth > MAX_DEPTH:
        return None
    if kind == "array_value":
        return [plain(v, depth + 1) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: plain(kv.value, depth + 1) for kv in value.kvlist_value.values}
    return getattr(value, kind)


_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value", "bytes_value"})


def attributes(key_values: Iterable[Any], wanted: frozenset[str] | None = None) -> dict[str, Any]:
    """KeyValues -> {key: plain value}; with `wanted`, only those keys are converted. Scalars,
    nearly every attribute, are read in place rather than through `plain`: reading a span's
    attributes is most of what a span costs the receiver."""
    out: dict[str, Any] = {}
    for kv in key_values:
        key = kv.key
        if wanted is not None and key not in wanted:
            continue
        value = kv.value
        kind = value.WhichOneof("value")
        out[key] = getattr(value, kind) if kind in _SCALARS else plain(value)
    return out


def first(attrs: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = attrs.get(name)
        if value is not None and value != "" and value != []:
            return value
    return None


def text(attrs: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    value = first(attrs, names)
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, list):  # e.g. finish reasons: the first
        return text({"v": value[0]}, ("v",)) if value else None
    return value if isinstance(value, str) else str(value)


def number(attrs: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    """A finite number: ints, doubles, and numeric strings (some exporters stringify)."""
    value = first(attrs, names)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def structured(value: Any) -> Any:
    """A content attribute: JSON text (how most SDKs record it) or a structured value."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value
