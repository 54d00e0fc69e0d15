"""What a query plan may do to the large tables, on SQLite (EXPLAIN QUERY PLAN) and PostgreSQL
(EXPLAIN (FORMAT JSON)): the statements a repository function sends are captured as it runs,
then explained with the same parameters.

A large table (`samples`, `embeddings`, `eval_scores`) may be read only through an index
lookup or range on a selective column (ids, sample ids, times). Anything else is a full scan:
a sequential scan, a walk of a whole index, or a lookup on an unselective column such as
`embeddings.model` (one value for every row of a model: the quadratic embed queue). A work
queue may walk `samples` in time order (its LIMIT stops the walk), never the other tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

LARGE_TABLES = frozenset({"samples", "embeddings", "eval_scores"})
# `hour`: the timestamp's hour bucket, a time range like `timestamp`
SELECTIVE_COLUMNS = frozenset(
    {"id", "rowid", "sample_id", "record_id", "timestamp", "hour", "ingested_at", "created_at"}
)
_SQLITE_STEP = re.compile(r"^(SCAN|SEARCH) (\w+)(?: AS \w+)?(.*)$")


@contextmanager
def captured(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The (SQL, parameters) of every SELECT/DELETE sent through `engine` inside the block."""
    statements: list[tuple[str, Any]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if not executemany and statement.lstrip().upper().startswith(("SELECT", "WITH", "DELETE")):
            statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _selective(condition: str) -> bool:
    words = set(re.findall(r"[a-z_]+", condition.lower()))
    return bool(words & SELECTIVE_COLUMNS)


def sqlite_violations(steps: list[str], walk: frozenset[str]) -> list[str]:
    """Problems in EXPLAIN QUERY PLAN's detail lines; `walk`: tables the query may walk."""
    out = []
    for step in steps:
        match = _SQLITE_STEP.match(step)
        if match is None or match.group(2) not in LARGE_TABLES:
            continue
        kind, table, rest = match.groups()
        if kind == "SCAN" and table not in walk:
            out.append(f"full scan: {step}")
        elif kind == "SEARCH" and not _selective(rest[rest.find("(") :] if "(" in rest else ""):
            out.append(f"unselective lookup: {step}")
    return out


def _pg_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _pg_nodes(child)


def pg_violations(plan: dict[str, Any], walk: frozenset[str]) -> list[str]:
    """Problems in one EXPLAIN (FORMAT JSON) plan tree."""
    out = []
    for node in _pg_nodes(plan["Plan"]):
        table, kind = node.get("Relation Name"), node["Node Type"]
        if table not in LARGE_TABLES:
            continue
        where = f"{kind} on {table} ({node.get('Index Name', '-')})"
        if kind == "Seq Scan":
            if table not in walk:
                out.append(f"full scan: {where}")
        elif kind in ("Index Scan", "Index Only Scan"):
            if not _selective(node.get("Index Cond", "")) and table not in walk:
                out.append(
                    f"whole-index walk or unselective lookup: {where} {node.get('Index Cond', '')}"
                )
        elif kind == "Bitmap Heap Scan" and not _selective(node.get("Recheck Cond", "")):
            out.append(f"unselective bitmap scan: {where} {node.get('Recheck Cond', '')}")
    return out


def explain(
    engine: Engine, statement: str, parameters: Any
) -> tuple[list[str], Callable[[frozenset[str]], list[str]]]:
    """(readable plan lines, violations(walk)) for one captured statement."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            raw = conn.exec_driver_sql(
                "EXPLAIN (FORMAT JSON) " + statement, parameters
            ).scalar_one()
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
            lines = [
                f"{n['Node Type']} {n.get('Relation Name', '')} {n.get('Index Name', '')} "
                f"{n.get('Index Cond', '')}".strip()
                for n in _pg_nodes(plan["Plan"])
            ]
            return lines, lambda walk: pg_violations(plan, walk)
        steps = [
            str(row[-1])
            for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
        ]
        return steps, lambda walk: sqlite_violations(steps, walk)
