"""Field types of the sample record: each one refuses what no path may store or compute on."""

from __future__ import annotations

import math
import operator
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from vigil.sample_record import limits
from vigil.sample_record.names import check_name

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_timestamp(value: Any) -> datetime:
    """Epoch seconds or an RFC 3339 string with a zone -> aware UTC datetime (years 1970-2199).
    A `datetime` (Python callers only) is taken as is, naive meaning UTC."""
    if isinstance(value, datetime):
        parsed = value if value.tzinfo else value.replace(tzinfo=UTC)
    elif isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(
            f"expected epoch seconds or an RFC 3339 string, got {type(value).__name__}"
        )
    elif isinstance(value, str):
        parsed = _parse_rfc3339(value)
    else:
        if not (math.isfinite(value) and 0 <= value < limits.MAX_EPOCH_S):
            raise ValueError("epoch seconds must be finite, between 0 and 7258118400 (1970-2199)")
        return datetime.fromtimestamp(float(value), UTC)
    parsed = parsed.astimezone(UTC)
    if not 1970 <= parsed.year < 2200:
        raise ValueError("the timestamp must fall in the years 1970-2199")
    return parsed


def _parse_rfc3339(text: str) -> datetime:
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(f"{text[:40]!r} is not an RFC 3339 timestamp (e.g. 2026-11-29T11:00:00Z)")
    fraction = (match.group(7) or "")[:7]  # datetime keeps microseconds: drop finer digits
    zone = match.group(8).upper().replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(
            text[:19].replace(" ", "T").replace("t", "T") + fraction + zone
        )
    except ValueError as exc:  # a day or hour out of range, e.g. 2026-02-30
        raise ValueError(f"{text[:40]!r} is not a valid date and time ({exc})") from None


def storable_text(value: str) -> str:
    """Refuse text no database stores: NUL (PostgreSQL text) and lone surrogates (not UTF-8)."""
    if "\x00" in value:
        raise ValueError("contains a NUL character (\\u0000), which cannot be stored")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "contains a lone surrogate (e.g. \\ud800), which is not valid Unicode"
        ) from None
    return value


def _integral(value: Any) -> Any:
    """3.0 -> 3 (JSON writers such as pandas emit integral floats); strings and bools stay
    as they are, for the strict check to refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, bool | str) and hasattr(value, "__index__"):  # numpy integers
        return operator.index(value)
    return value


def _plain_list(value: Any) -> Any:
    """numpy arrays (Python callers) -> lists; everything else is left for the list check."""
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, list) else value


def _storable_if_text(value: Any) -> Any:
    return storable_text(value) if isinstance(value, str) else value


def _name_if_text(value: Any) -> Any:
    return check_name(value) if isinstance(value, str) else value


def _real(lo: float | None = None, hi: float | None = None, **bounds: float) -> Any:
    """The Field of a finite float in [lo, hi] (plus `gt`/`lt` bounds)."""
    # pydantic's Field overloads name each keyword; a **dict of bounds matches none of them
    return Field(strict=True, allow_inf_nan=False, ge=lo, le=hi, **bounds)  # type: ignore[call-overload]


def _text(max_chars: int, min_chars: int = 0, **kw: Any) -> Any:
    """The Field of a string of min_chars..max_chars characters."""
    return Field(strict=True, min_length=min_chars, max_length=max_chars, **kw)


# Spelled out as Annotated aliases (not built by a function) so type checkers read them as types.
_Storable = BeforeValidator(_storable_if_text)
_Name = BeforeValidator(_name_if_text)  # a name a client chooses: the safe characters only
_NAME_SCHEMA = {"pattern": limits.NAME_PATTERN}
Text = Annotated[str, _text(limits.MAX_TEXT_CHARS), _Storable]
Key = Annotated[str, _text(limits.MAX_KEY_CHARS, 1, json_schema_extra=_NAME_SCHEMA), _Name]
FinishReason = Annotated[
    str, _text(limits.MAX_FINISH_REASON_CHARS, 1, json_schema_extra=_NAME_SCHEMA), _Name
]
ModelName = Annotated[
    str,
    _text(
        limits.MAX_MODEL_NAME_CHARS + len(limits.CLIENT_MODEL_PREFIX),
        1,
        json_schema_extra=_NAME_SCHEMA,
    ),
    _Name,
]
SampleId = Annotated[str, _text(limits.MAX_ID_CHARS, 1, pattern=limits.ID_PATTERN), _Storable]
# constraints before the BeforeValidator, so that the JSON Schema states them
Count = Annotated[int, Field(strict=True, ge=0, le=limits.MAX_TOKENS), BeforeValidator(_integral)]
Millis = Annotated[float, _real(0.0, limits.MAX_MS)]
LogProb = Annotated[float, _real(-limits.MAX_LOGPROB_MAGNITUDE, 0.0)]
Entropy = Annotated[float, _real(0.0, limits.MAX_LOGPROB_MAGNITUDE)]
Score = Annotated[float, _real(-limits.MAX_EVAL_MAGNITUDE, limits.MAX_EVAL_MAGNITUDE)]
Weight = Annotated[float, _real(hi=limits.MAX_SAMPLE_WEIGHT, gt=0.0)]
Tools = Annotated[list[Key], Field(max_length=limits.MAX_TOOLS), BeforeValidator(_plain_list)]
Vector = Annotated[
    list[Annotated[float, _real(-limits.FLOAT32_MAX, limits.FLOAT32_MAX)]],
    Field(min_length=1, max_length=limits.MAX_EMBEDDING_DIM),
    BeforeValidator(_plain_list),
]
Timestamp = Annotated[
    datetime,
    BeforeValidator(parse_timestamp),
    WithJsonSchema({
        "anyOf": [
            {"type": "number", "minimum": 0, "exclusiveMaximum": limits.MAX_EPOCH_S},
            {"type": "string", "format": "date-time"},
        ],
        "description": "epoch seconds or an RFC 3339 string with a zone; default: now",
    }),
]  # fmt: skip
