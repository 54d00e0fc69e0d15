"""Schema migrations: `upgrade(url)` applies the Alembic revisions in `storage/migrations`
(found next to this file, so an installed package finds them too); `vigil db upgrade|current`."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import URL

from storage.db import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade(url: str | URL, revision: str = "head") -> str | None:
    """Apply migrations on `url` up to `revision`; returns the revision the database is at.

    Concurrent upgrades (an engine and a sidecar starting together on a fresh database) are
    serialised: on PostgreSQL by a transaction-level advisory lock keyed on the current schema,
    on SQLite by an flock on `<file>.migrate.lock` beside the database file.
    """
    engine = make_engine(url)
    try:
        with _sqlite_file_lock(engine.url), engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text(
                        "SELECT pg_advisory_xact_lock("
                        "hashtext('vigil-migrate:' || current_schema()))"
                    )
                )
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


@contextmanager
def _sqlite_file_lock(url: URL) -> Iterator[None]:
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        yield
        return
    lock_path = Path(url.database).expanduser().with_name(Path(url.database).name + ".migrate.lock")
    with open(lock_path, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released when the file closes
        yield


def current_revision(url: str | URL) -> str | None:
    """The revision the database is at (None: never migrated)."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str:
    """The newest revision shipped with this code."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations found in " + str(MIGRATIONS_DIR)
    return head
