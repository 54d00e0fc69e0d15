"""Vigil storage: SQLAlchemy 2.0 on SQLite (WAL, default) or PostgreSQL (psycopg 3).

Modules (import what you need; this file imports nothing so `import storage` stays cheap):
    storage.db            make_engine / get_engine / session_factory / session_scope /
                          dispose_engines
    storage.migrate       upgrade(url) — Alembic migrations (storage/migrations); `vigil db ...`
    storage.models        the tables, one module per family; storage.types UTCDateTime, utcnow,
                          to_utc
    storage.records       the sample record <-> row mapping (validated by vigil.sample_record):
                          sample_from_record, record_from_row, format_timestamp, vector_to_bytes
    storage.repositories  query functions (take a Session, never commit)
    storage.writer        SampleWriter: non-blocking batched writes with a spill journal
    storage.journal       the writer's fsync'd JSON-lines journal
    storage.batch_queue   the writer's bounded queue, taken off in batches by its thread

Conventions: every datetime is aware UTC (naive input is taken as UTC); time windows are
half-open [start, end); sample ids are strings (UUID4 when generated) and the idempotency key.
"""
