"""Reading JSONL files of logged samples for `vigil check`, with errors that say where.

Each line is one JSON object with DESIGN's sample fields. A line that is not a JSON object, or
a field of the wrong type, stops the read with "file:line: message".
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

NUMBER_FIELDS = ("prompt_tokens", "completion_tokens", "ttft_ms", "tpot_ms", "latency_ms",
                 "queue_ms", "mean_logprob", "mean_entropy", "sample_weight")
STRING_FIELDS = ("id", "tenant", "segment", "prompt_version", "model_version", "prompt",
                 "response", "finish_reason")
EMBEDDING_FIELDS = ("prompt_embedding", "response_embedding")


class InputError(ValueError):
    """Bad input; the message names the file and line."""


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def check_record(rec: Any) -> None:
    """Raise ValueError naming the field at fault."""
    if not isinstance(rec, dict):
        raise ValueError(f"expected a JSON object, got {type(rec).__name__}")
    if not any(k in rec for k in ("prompt", "prompt_tokens", "prompt_embedding")):
        raise ValueError("record has none of prompt, prompt_tokens, prompt_embedding")
    for k in NUMBER_FIELDS:
        if rec.get(k) is not None and not _is_number(rec[k]):
            raise ValueError(f"{k}: expected a finite number, got {rec[k]!r}")
    for k, v in rec.items():
        if (k == "eval_score" or k.startswith("eval_")) and v is not None and not _is_number(v):
            raise ValueError(f"{k}: expected a finite number, got {v!r}")
    for k in STRING_FIELDS:
        if rec.get(k) is not None and not isinstance(rec[k], str):
            raise ValueError(f"{k}: expected a string, got {type(rec[k]).__name__}")
    tools = rec.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
        raise ValueError("tools: expected a list of strings")
    ts = rec.get("timestamp")
    if ts is not None and not (_is_number(ts) or isinstance(ts, str)):
        raise ValueError(f"timestamp: expected epoch seconds or an RFC 3339 string, got {ts!r}")
    if isinstance(ts, str):
        try:
            pd.Timestamp(ts)
        except ValueError:
            raise ValueError(f"timestamp: {ts!r} is not an RFC 3339 timestamp") from None
    for k in EMBEDDING_FIELDS:
        v = rec.get(k)
        if v is not None and not (isinstance(v, list) and v and all(_is_number(x) for x in v)):
            raise ValueError(f"{k}: expected a non-empty list of finite numbers")


def read_jsonl(path: str | Path) -> pd.DataFrame:
    """A frame of the file's records (one row per non-blank line); InputError on bad input."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    records, dims = [], {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                check_record(rec)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            except ValueError as exc:
                raise InputError(f"{path}:{lineno}: {exc}") from None
            for k in EMBEDDING_FIELDS:
                if rec.get(k) is not None:
                    first = dims.setdefault(k, (len(rec[k]), lineno))
                    if len(rec[k]) != first[0]:
                        raise InputError(f"{path}:{lineno}: {k} has {len(rec[k])} values, line "
                                         f"{first[1]} had {first[0]}")
            rec["_line"] = lineno
            records.append(rec)
    if not records:
        raise InputError(f"{path}: no records")
    return pd.DataFrame.from_records(records)
