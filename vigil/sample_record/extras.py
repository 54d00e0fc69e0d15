"""Unknown fields of a record: kept (in the row's `extra` column) when they are plain JSON of
bounded shape, refused with the field's path otherwise."""

from __future__ import annotations

import math
from typing import Any

from vigil.sample_record import limits
from vigil.sample_record.fields import storable_text
from vigil.sample_record.names import name_problem


def check_field_name(name: Any) -> str:
    if not isinstance(name, str):
        raise ValueError(f"field names must be strings, got {type(name).__name__}")
    if not 1 <= len(name) <= limits.MAX_FIELD_NAME_CHARS:
        raise ValueError(f"field names must be 1-{limits.MAX_FIELD_NAME_CHARS} characters")
    problem = name_problem(name)
    if problem:
        raise ValueError(f"the field name {name[:40]!r} {problem}")
    return name


def check_eval_score(name: str, value: Any) -> float:
    """`eval_<name>`: a finite number within the eval bound, the name 1-64 characters."""
    score_name = name[len("eval_") :]
    if not 1 <= len(score_name) <= limits.MAX_EVAL_NAME_CHARS:
        raise ValueError(f"{name}: the evaluator name after 'eval_' must be 1-64 characters")
    if score_name == "default":  # the name `eval_score` is stored under
        raise ValueError("eval_default: reserved, send the default score as 'eval_score'")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: evaluator scores must be numbers, got {type(value).__name__}")
    if not (math.isfinite(value) and abs(value) <= limits.MAX_EVAL_MAGNITUDE):
        raise ValueError(f"{name}: evaluator scores must be finite, within +-1e12")
    return float(value)


def check_json_value(value: Any, path: str) -> None:
    """Raise ValueError naming the path of the first value that is not storable JSON: NaN/inf,
    integers beyond 64 bits, NUL/surrogates in text, too deep or too many values."""
    budget = [limits.MAX_EXTRA_VALUES]
    _walk(value, path, 0, budget)


def _walk(value: Any, path: str, depth: int, budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(f"{path}: unknown fields hold more than {limits.MAX_EXTRA_VALUES} values")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        try:
            storable_text(value)
        except ValueError as exc:
            raise ValueError(f"{path} {exc}") from None
        return
    if isinstance(value, int):
        if abs(value) > limits.MAX_EXTRA_INT:
            raise ValueError(f"{path}: integer outside the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: {value!r} is not a finite number")
        return
    if depth >= limits.MAX_EXTRA_DEPTH and isinstance(value, dict | list):
        raise ValueError(f"{path}: nested deeper than {limits.MAX_EXTRA_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path}: object keys must be strings")
            problem = name_problem(key)
            if problem:
                raise ValueError(f"{path}: the key {key[:40]!r} {problem}")
            _walk(item, f"{path}.{key[:40]}", depth + 1, budget)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", depth + 1, budget)
    else:
        raise ValueError(f"{path}: {type(value).__name__} is not a JSON value")
