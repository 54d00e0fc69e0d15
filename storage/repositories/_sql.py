"""Dialect helpers shared by the repository modules."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Column, CursorResult, Delete, Table, Update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from storage.records import format_timestamp


def insert_ignore(
    session: Session,
    table: Table,
    rows: Sequence[dict[str, Any]],
    conflict_cols: Sequence[str],
    returning: Column | None = None,
) -> list[Any]:
    """INSERT ... ON CONFLICT (conflict_cols) DO NOTHING for many rows, on SQLite and
    PostgreSQL alike (no conflict_cols: any unique index or key). Returns the `returning`
    values of the rows actually inserted."""
    if not rows:
        return []
    dialect = session.get_bind().dialect.name
    stmt: sqlite.Insert | postgresql.Insert
    if dialect == "sqlite":
        stmt = sqlite.insert(table)
    elif dialect == "postgresql":
        stmt = postgresql.insert(table)
    else:  # pragma: no cover - make_engine refuses other backends
        raise ValueError(f"unsupported dialect {dialect}")
    stmt = stmt.on_conflict_do_nothing(index_elements=list(conflict_cols) or None)
    if returning is None:
        session.execute(stmt, list(rows))
        return []
    result = session.execute(stmt.returning(returning), list(rows))
    return list(result.scalars())


def affected_rows(session: Session, statement: Update | Delete) -> int:
    """Run an UPDATE or DELETE (without RETURNING); the number of rows it matched.
    `Session.execute` is typed as returning a `Result`; for these statements it is the
    `CursorResult` that carries `rowcount`."""
    result = session.execute(statement)
    if not isinstance(result, CursorResult):  # pragma: no cover - DML always gives one
        raise TypeError(f"expected a CursorResult, got {type(result).__name__}")
    return int(result.rowcount or 0)


def chunked(items: Iterable[Any], size: int = 500) -> Iterator[list[Any]]:
    """Split `items` in lists of at most `size` (keeps IN lists under SQLite's variable limit)."""
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def to_jsonable(value: Any) -> Any:
    """numpy scalars/arrays -> Python, datetimes -> RFC 3339, NaN/inf -> None (JSON has none),
    recursively; so results straight from numpy can be stored in JSON columns on both backends."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return format_timestamp(value)
    return value


def opt_float(value: Any) -> float | None:
    """None/NaN -> None, else a Python float (psycopg does not adapt numpy scalars)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
