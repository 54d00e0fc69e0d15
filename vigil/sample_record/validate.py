"""Validating one record for a path that is not FastAPI: one exception type, one message shape
("field: what is wrong"), whatever the input was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from vigil.sample_record import limits
from vigil.sample_record.schema import SampleRecord


class RecordError(ValueError):
    """A record is invalid; the message names the field(s) at fault."""


def error_path(loc: tuple[Any, ...]) -> str:
    """("samples", 3, "ttft_ms") -> "samples[3].ttft_ms"; () -> "record"."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "record"


def describe(exc: ValidationError, limit: int = 5) -> str:
    """The first `limit` errors as "path: message; ...", without pydantic's "Value error, "."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:limit]:
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{error_path(tuple(err['loc']))}: {message}")
    return "; ".join(parts)


def check_not_future(
    timestamp: datetime | None, now: datetime, max_skew_s: float = limits.DEFAULT_MAX_FUTURE_SKEW_S
) -> None:
    """Raise ValueError when `timestamp` is later than `now` plus the allowed clock skew."""
    if timestamp is not None and timestamp > now + timedelta(seconds=max_skew_s):
        raise ValueError(
            f"{timestamp.isoformat()} is more than {max_skew_s:g} s in the future "
            f"(now {now.isoformat()}): check the sender's clock"
        )


def validate_record(
    data: Any,
    *,
    now: datetime | None = None,
    max_future_skew_s: float = limits.DEFAULT_MAX_FUTURE_SKEW_S,
) -> SampleRecord:
    """Validate `data` (see `vigil.sample_record.schema`); RecordError on anything invalid."""
    if isinstance(data, SampleRecord):
        record = data
    else:
        try:
            record = SampleRecord.model_validate(data)
        except ValidationError as exc:
            raise RecordError(describe(exc)) from None
        except RecursionError:  # a Python caller's self-referencing structure
            raise RecordError("record: nested too deeply") from None
    try:
        check_not_future(record.timestamp, now or datetime.now(UTC), max_future_skew_s)
    except ValueError as exc:
        raise RecordError(f"timestamp: {exc}") from None
    return record
