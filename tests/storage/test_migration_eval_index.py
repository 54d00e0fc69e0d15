"""Migration 0006 (SQLite and PostgreSQL): the index on eval_scores (sample_id, name, score) is
there after upgrade, gone after downgrade, back after upgrade again; the rows stay throughout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alembic import command
from sqlalchemy import event, func, inspect, select

from storage.db import make_engine, session_factory, session_scope
from storage.migrate import alembic_config, current_revision, head_revision, upgrade
from storage.models import EvalScore, Sample
from storage.repositories.series_buckets import eval_bucket_means

INDEX = "ix_eval_scores_sample_name_score"
AT = datetime(2026, 11, 30, 12, tzinfo=UTC)


def _downgrade(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def _eval_indexes(url: str) -> dict[str, list[str]]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return {ix["name"]: ix["column_names"] for ix in inspect(connection).get_indexes("eval_scores")}
    finally:
        engine.dispose()


def _scores(url: str) -> int:
    with session_scope(url) as s:
        return int(s.scalar(select(func.count()).select_from(EvalScore)))


def test_eval_index_upgrades_and_downgrades(db_url):
    assert upgrade(db_url, "0005") == "0005"
    assert INDEX not in _eval_indexes(db_url)
    with session_scope(db_url) as s:
        s.add(Sample(id="s1", timestamp=AT, sample_weight=1.0, source="ingest"))
        s.flush()
        s.add(EvalScore(sample_id="s1", name="judge", score=4.0, created_at=AT))
    assert upgrade(db_url, "0006") == "0006"
    assert _eval_indexes(db_url)[INDEX] == ["sample_id", "name", "score"]
    _downgrade(db_url, "0005")
    assert current_revision(db_url) == "0005"
    assert INDEX not in _eval_indexes(db_url) and _scores(db_url) == 1
    assert upgrade(db_url) == head_revision()
    assert _eval_indexes(db_url)[INDEX] == ["sample_id", "name", "score"] and _scores(db_url) == 1


def test_sqlite_eval_series_reads_scores_from_the_index_alone(tmp_path):
    """The bucketed eval series never visits eval_scores' table rows on SQLite."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    upgrade(url)
    statements: list[tuple[str, tuple]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append((statement, parameters))

    with session_factory(url)() as s:
        engine = s.get_bind()
        event.listen(engine, "before_cursor_execute", capture)
        try:
            eval_bucket_means(s, AT - timedelta(days=1), AT, (AT - timedelta(days=1)).timestamp(), 3600)
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        ((statement, parameters),) = [(q, p) for q, p in statements if "eval_scores" in q]
        plan = [row[-1] for row in s.connection().exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)]
    assert any(f"COVERING INDEX {INDEX}" in step for step in plan), plan
