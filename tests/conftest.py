"""Shared fixtures for the whole suite — storage-touching tests run on SQLite AND PostgreSQL.

    db_url            a fresh, EMPTY database URL, parametrized over ["sqlite", "postgresql"]
                      (function scope). SQLite: a file in tmp_path. PostgreSQL: a new schema
                      `t_<hex>` in the `test` database, selected through the URL itself
                      (`?options=-csearch_path=t_<hex>&application_name=vigil-test-t_<hex>`), so
                      every engine, subprocess and Alembic run on that URL lands in it; the schema
                      is dropped afterwards (its connections are terminated first).
    migrated_db       a database at the head revision, built by the Alembic migrations (never
                      create_all), parametrized the same way; the usual fixture. Every table is
                      empty when the test starts. On PostgreSQL migrated schemas are pooled:
                      after a test its connections are terminated, all rows deleted (tables
                      others created in it too, e.g. APScheduler's) and sequences restarted;
                      the next test reuses it (~10x cheaper than migrating anew). Do not ALTER
                      its schema; use db_url for schema experiments.
    db_session        a Session on migrated_db; committed by you, closed afterwards.
    db_url_module / migrated_db_module
                      the same with module scope, for modules whose tests can share one database.
    pg_url            a migrated, empty PostgreSQL schema URL only (not parametrized, pooled), for
                      PostgreSQL-specific tests (advisory locks, killed connections, ...).
    pg_admin_url      the base PostgreSQL URL (database `test`), for admin statements.

PostgreSQL comes from VIGIL_TEST_PG_URL
(default postgresql+psycopg://postgres@127.0.0.1:5432/test).
If it is unreachable the PostgreSQL parameters FAIL, unless VIGIL_TEST_PG=0 (then they skip).

Usage:
    def test_roundtrip(migrated_db):             # runs twice: [sqlite] and [postgresql]
        with session_scope(migrated_db) as s: ...
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from storage.db import dispose_engines, session_factory
from storage.migrate import head_revision, upgrade

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PG_BASE_URL = os.environ.get(
    "VIGIL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
BACKENDS = ["sqlite", "postgresql"]
_pg_status: dict[str, str | None] = {}


def _libpq_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _require_pg() -> None:
    """Fail (or skip with VIGIL_TEST_PG=0) when PostgreSQL is unreachable; checked once."""
    if os.environ.get("VIGIL_TEST_PG") == "0":
        pytest.skip("VIGIL_TEST_PG=0: PostgreSQL tests skipped")
    # imported here, not at the top: GPU machines run the suite without libpq
    import psycopg

    if "error" not in _pg_status:
        try:
            with psycopg.connect(_libpq_dsn(PG_BASE_URL), connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            _pg_status["error"] = None
        except psycopg.Error as exc:
            _pg_status["error"] = str(exc).strip()
    if _pg_status["error"]:
        pytest.fail(
            f"PostgreSQL unreachable at {PG_BASE_URL} ({_pg_status['error']}); start it "
            "(`make test-setup` starts an installed local cluster) or set VIGIL_TEST_PG=0 to skip "
            "the PostgreSQL parameters",
            pytrace=False,
        )


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(_libpq_dsn(PG_BASE_URL), autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql)


def new_pg_schema() -> tuple[str, str]:
    """Create a fresh schema; return (schema, URL whose connections live in it)."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    _admin(f'CREATE SCHEMA "{schema}"')
    url = make_url(PG_BASE_URL).update_query_dict(
        {"options": f"-csearch_path={schema}", "application_name": f"vigil-test-{schema}"}
    )
    return schema, url.render_as_string(hide_password=False)


def drop_pg_schema(schema: str, url: str) -> None:
    dispose_engines(url)
    _admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE application_name = 'vigil-test-{schema}' AND pid <> pg_backend_pid()"
    )
    _admin(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _make_db(backend: str, tmp: Path) -> Iterator[str]:
    if backend == "sqlite":
        url = f"sqlite:///{tmp / 'vigil.db'}"
        yield url
        dispose_engines(url)
        return
    _require_pg()
    schema, url = new_pg_schema()
    try:
        yield url
    finally:
        drop_pg_schema(schema, url)


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> Iterator[str]:
    yield from _make_db(request.param, tmp_path)


_pg_pool: list[tuple[str, str]] = []  # migrated, emptied PostgreSQL schemas ready for reuse


def _acquire_migrated_pg() -> tuple[str, str]:
    if _pg_pool:
        return _pg_pool.pop()
    schema, url = new_pg_schema()
    upgrade(url)
    return schema, url


def _release_migrated_pg(schema: str, url: str) -> None:
    """Empty the schema and pool it; drop it instead if it is no longer at head."""
    import psycopg

    dispose_engines(url)
    try:
        with psycopg.connect(_libpq_dsn(PG_BASE_URL), autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (f"vigil-test-{schema}",),
            )
            conn.execute("SET lock_timeout = '5s'")
            version = conn.execute(f'SELECT version_num FROM "{schema}".alembic_version').fetchall()
            if version != [(head_revision(),)]:
                raise RuntimeError("schema no longer at head")
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables"
                    " WHERE schemaname = %s AND tablename <> 'alembic_version'",
                    (schema,),
                )
            ]  # tables made by others too, e.g. APScheduler's job store
            sequences = [row[0] for row in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,)
            )]  # fmt: skip
            # DELETE on these tiny tables is ~50x faster than TRUNCATE (new files + fsync);
            # replica mode skips FK triggers so the order of deletes does not matter
            with conn.transaction():
                conn.execute("SET LOCAL session_replication_role = replica")
                for table in tables:
                    conn.execute(f'DELETE FROM "{schema}"."{table}"')
                for seq in sequences:
                    conn.execute(f'ALTER SEQUENCE "{schema}"."{seq}" RESTART')
    except (psycopg.Error, RuntimeError):
        drop_pg_schema(schema, url)
        return
    _pg_pool.append((schema, url))


@pytest.fixture(scope="session", autouse=True)
def _drop_pooled_pg_schemas():
    yield
    while _pg_pool:
        drop_pg_schema(*_pg_pool.pop())


@pytest.fixture(params=BACKENDS)
def migrated_db(request, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'vigil.db'}"
        upgrade(url)
        yield url
        dispose_engines(url)
        return
    _require_pg()
    schema, url = _acquire_migrated_pg()
    try:
        yield url
    finally:
        _release_migrated_pg(schema, url)


@pytest.fixture
def db_session(migrated_db):
    session = session_factory(migrated_db)()
    try:
        yield session
    finally:
        session.rollback()
        session.close()


@pytest.fixture(scope="module", params=BACKENDS)
def db_url_module(request, tmp_path_factory) -> Iterator[str]:
    yield from _make_db(request.param, tmp_path_factory.mktemp("db"))


@pytest.fixture(scope="module")
def migrated_db_module(db_url_module) -> str:
    upgrade(db_url_module)
    return db_url_module


@pytest.fixture
def pg_admin_url() -> str:
    _require_pg()
    return PG_BASE_URL


@pytest.fixture
def pg_url() -> Iterator[str]:
    _require_pg()
    schema, url = _acquire_migrated_pg()
    try:
        yield url
    finally:
        _release_migrated_pg(schema, url)


# --- sidecar and dashboards: settings with a private report dir, the embedder once per session


@pytest.fixture
def make_settings(tmp_path):
    """settings(database_url, **overrides) with a private report dir, a test API key and a test
    operator key (ingest of backdated or tenant-labelled samples). Baseline validation skips the
    power simulation (its own tests cover it) unless `baseline_power=True` is passed."""
    from sidecar_servers import API_KEY, OPERATOR_KEY

    from vigil.config import load_settings

    def build(database_url: str, **overrides):
        values = {
            "database_url": database_url,
            "report_dir": tmp_path / "reports",
            "journal_dir": tmp_path / "journal",
            "api_keys": [API_KEY],
            "operator_keys": [OPERATOR_KEY],
            "public_url": "http://127.0.0.1:8001",
            "baseline_power": False,
        }
        values.update(overrides)
        return load_settings(**values)

    return build


@pytest.fixture(scope="session")
def embedder():
    """The MiniLM embedder, loaded once per test session, on one thread (test workers share few
    cores)."""
    import torch

    torch.set_num_threads(1)
    from sidecar.embed_device import EmbedConfig
    from sidecar.embedder import get_embedder

    return get_embedder(EmbedConfig(device="cpu"))
