"""Alembic environment: the connection is handed in by `storage.migrate` (never an .ini URL),
so the same engine settings (SQLite pragmas, PostgreSQL search_path in the URL) apply."""

from __future__ import annotations

from alembic import context

from storage.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place: later revisions use batch mode there
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; use `vigil db upgrade`")
run_migrations_online()
