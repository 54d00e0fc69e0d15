"""Engines and sessions from a database URL (SQLite or PostgreSQL), the same code on both.

SQLite: WAL mode (readers never block the writer), foreign keys on (cascading deletes), a busy
timeout (concurrent writers wait instead of failing), and the file's folder is created; the
file itself is created 0600 (it holds prompts), and SQLite gives its WAL files the same mode.
PostgreSQL (psycopg 3): `pool_pre_ping` so a connection killed server-side is replaced on
checkout, and a connect timeout so an unreachable server fails fast instead of hanging.

Repository functions take a `Session` and never commit; wrap work in `session_scope(url)`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 10_000
PG_CONNECT_TIMEOUT_S = 5

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.execute("PRAGMA journal_mode = WAL")
    # with WAL, NORMAL is durable against application crashes (only an OS crash can lose the
    # last commits) and much faster than FULL
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.close()


def _private_file(path: Path) -> None:
    """The SQLite file holds prompts and responses: create it (and its folder) 0600 before
    SQLite opens it, and tighten one an older version left readable. SQLite gives its WAL,
    shared-memory and rollback journal files the database file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    for file in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            if file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)


def make_engine(url: str | URL, **kwargs) -> Engine:
    """A new Engine for `url` (sqlite:///path or postgresql+psycopg://...); see module doc."""
    url = make_url(url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        if not _is_memory(url) and not url.query.get("uri"):
            _private_file(Path(url.database or "").expanduser())
        connect_args = kwargs.pop("connect_args", {})
        connect_args.setdefault("check_same_thread", False)
        connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
        engine = create_engine(url, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if backend == "postgresql":
        if url.drivername == "postgresql":  # plain scheme: use psycopg 3, the driver we ship
            url = url.set(drivername="postgresql+psycopg")
        connect_args = kwargs.pop("connect_args", {})
        connect_args.setdefault("connect_timeout", PG_CONNECT_TIMEOUT_S)
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(url, connect_args=connect_args, **kwargs)
    raise ValueError(f"unsupported database backend {backend!r}: use sqlite or postgresql")


def get_engine(url: str | URL) -> Engine:
    """The process-wide shared Engine for `url` (one pool per URL); created on first use."""
    key = make_url(url).render_as_string(hide_password=False)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = make_engine(key)
        return engine


def dispose_engines(url: str | URL | None = None) -> None:
    """Close the pooled connections of the shared engine for `url` (all engines if None)."""
    with _engines_lock:
        if url is None:
            keys = list(_engines)
        else:
            keys = [make_url(url).render_as_string(hide_password=False)]
        for key in keys:
            engine = _engines.pop(key, None)
            if engine is not None:
                engine.dispose()


def session_factory(bind: str | URL | Engine) -> sessionmaker[Session]:
    """A sessionmaker on `bind` (a URL uses the shared engine). expire_on_commit=False so
    objects returned by repository functions stay readable after the session commits."""
    engine = bind if isinstance(bind, Engine) else get_engine(bind)
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(bind: str | URL | Engine) -> Iterator[Session]:
    """`with session_scope(url) as s:` — commits on success, rolls back on error, closes."""
    session = session_factory(bind)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
