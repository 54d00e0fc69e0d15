"""The schema is built by the Alembic migrations, on SQLite and PostgreSQL, and matches the
models."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from storage.db import make_engine, session_scope
from storage.migrate import MIGRATIONS_DIR, current_revision, head_revision, upgrade
from storage.models import Base, Sample
from vigil.cli import main as cli
from vigil.config import get_settings


def test_upgrade_creates_every_model_table_and_matches_models(db_url):
    assert current_revision(db_url) is None
    assert upgrade(db_url) == head_revision()
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            assert set(Base.metadata.tables) | {"alembic_version"} <= tables
            # autogenerate finds nothing to change: migrations and models agree exactly
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(ctx, Base.metadata) == []
    finally:
        engine.dispose()
    assert upgrade(db_url) == head_revision()  # idempotent


def test_datetimes_come_back_utc_aware(migrated_db):
    cest = timezone(timedelta(hours=2))
    local = datetime(2026, 6, 1, 14, 30, 15, 123456, tzinfo=cest)
    with session_scope(migrated_db) as s:
        s.add(Sample(id="tz", timestamp=local, sample_weight=1.0, source="engine"))
    with session_scope(migrated_db) as s:
        ts = s.get(Sample, "tz").timestamp
        assert ts.tzinfo is not None and ts.utcoffset() == timedelta(0)
        assert ts == local and ts.hour == 12
        # filtering with an aware bound in another zone compares instants, not wall clocks
        n = (
            s.query(Sample)
            .filter(Sample.timestamp >= datetime(2026, 6, 1, 12, 30, tzinfo=UTC))
            .count()
        )
        assert n == 1


def test_sqlite_engine_pragmas(tmp_path):
    url = f"sqlite:///{tmp_path / 'nested' / 'dir' / 'v.db'}"  # parent folders get created
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 1000
    finally:
        engine.dispose()
    assert (tmp_path / "nested" / "dir" / "v.db").exists()


def test_db_command_in_process(db_url, monkeypatch, capsys):
    monkeypatch.setenv("VIGIL_DATABASE_URL", db_url)
    get_settings.cache_clear()
    try:
        assert cli.main(["db", "current"]) == 0
        assert "(none)" in capsys.readouterr().out
        assert cli.main(["db", "upgrade"]) == 0
        assert head_revision() in capsys.readouterr().out
        assert cli.main(["db", "current"]) == 0
        assert "up to date" in capsys.readouterr().out
    finally:
        get_settings.cache_clear()
    assert current_revision(db_url) == head_revision()


def test_vigil_db_upgrade_console_script_from_another_cwd(tmp_path):
    """The installed `vigil` finds the migrations next to the storage package, whatever the cwd."""
    assert MIGRATIONS_DIR.is_dir() and (MIGRATIONS_DIR / "env.py").exists()
    vigil = Path(sys.executable).with_name("vigil")
    env = {**os.environ, "VIGIL_DATABASE_URL": "sqlite:///./var/sub/vigil.db"}
    result = subprocess.run(
        [str(vigil), "db", "upgrade"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    db_file = tmp_path / "var" / "sub" / "vigil.db"
    assert db_file.exists()
    assert current_revision(f"sqlite:///{db_file}") == head_revision()


def test_concurrent_upgrades_are_serialised(db_url):
    """Engine and sidecar start together on a fresh database: both upgrades must succeed."""
    errors: list[BaseException] = []
    revisions: list[str | None] = []

    def run() -> None:
        try:
            revisions.append(upgrade(db_url))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and revisions == [head_revision()] * 3


def test_lookups_by_sample_use_the_unique_indexes(db_url):
    """The single-column sample_id indexes are gone (0007); the unique constraints' indexes,
    which lead with sample_id, are what a lookup by sample uses."""
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            insp = inspect(conn)
            for table in ("eval_scores", "embeddings"):
                assert [
                    i["name"] for i in insp.get_indexes(table) if i["column_names"] == ["sample_id"]
                ] == []
                unique = [c["column_names"] for c in insp.get_unique_constraints(table)]
                assert any(cols[0] == "sample_id" for cols in unique), unique
            if engine.dialect.name == "sqlite":
                for table in ("eval_scores", "embeddings"):
                    plan = " ".join(
                        str(row[-1])
                        for row in conn.exec_driver_sql(
                            f"EXPLAIN QUERY PLAN SELECT * FROM {table} WHERE sample_id = 'x'"
                        )
                    )
                    assert "USING INDEX" in plan, plan
    finally:
        engine.dispose()
