"""Smaller doors: pages are for global (reader) and admin keys, never operator keys; a forged
session cookie holding non-ASCII is a plain miss (401 or the login page), not a 500; the
SQLite file holding prompts and its WAL files are owner-only; building a baseline from the page
does not stall the sidecar's other requests."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
import time

import httpx
from fastapi import FastAPI
from sec_fakes import ADMIN_KEY, API_KEY, OPERATOR_KEY, TENANT_KEY
from sidecar_calls import log_in, page_client
from sidecar_servers import UvicornThread
from sqlalchemy import text

from dashboards.baseline_jobs import BaselineJobs
from dashboards.baselines_page import BaselineOps, build_baselines_router
from sidecar.app import create_app
from sidecar.page_auth import COOKIE
from storage.db import make_engine, session_factory
from vigil.keys import Principal


def _sidecar(migrated_db, make_settings):
    settings = make_settings(
        migrated_db,
        api_keys=[API_KEY],
        tenant_keys={TENANT_KEY: "acme"},
        admin_keys=[ADMIN_KEY],
        operator_keys=[OPERATOR_KEY],
    )
    return create_app(settings, session_factory(migrated_db))


async def _statuses(app) -> dict[str, int]:
    async with page_client(app) as c:
        out = {}
        for role, key in (
            ("global", API_KEY),
            ("admin", ADMIN_KEY),
            ("operator", OPERATOR_KEY),
            ("tenant", TENANT_KEY),
        ):
            out[role] = (
                await c.get("/alerts", headers={"Authorization": f"Bearer {key}"})
            ).status_code
        login = await c.post("/login", data={"key": OPERATOR_KEY, "next": "/alerts"})
        out["operator login"] = login.status_code
        await log_in(c, API_KEY)  # a reader's login still works
        out["reader session"] = (await c.get("/alerts")).status_code
        return out


def test_operator_keys_do_not_read_pages(migrated_db, make_settings):
    """Was: an operator key (a gateway's, the judge's) read /alerts and could log in."""
    statuses = asyncio.run(_statuses(_sidecar(migrated_db, make_settings)))
    assert statuses == {
        "global": 200,
        "admin": 200,
        "operator": 403,
        "tenant": 403,
        "operator login": 401,
        "reader session": 200,
    }


async def _with_cookie(app, accept: str) -> httpx.Response:
    async with page_client(app) as c:
        forged = f"{COOKIE}=eA.\u00e9\u00e9".encode()  # a non-ASCII signature
        return await c.get("/alerts", headers={"cookie": forged, "accept": accept})


def test_a_non_ascii_session_cookie_is_a_plain_miss(migrated_db, make_settings):
    """Was: 500 (hmac.compare_digest refuses non-ASCII str) for a caller with no key."""
    app = _sidecar(migrated_db, make_settings)
    assert asyncio.run(_with_cookie(app, "application/json")).status_code == 401
    browser = asyncio.run(_with_cookie(app, "text/html"))
    assert browser.status_code == 303 and browser.headers["location"].startswith("/login")


def test_the_sqlite_database_and_its_wal_are_owner_only(tmp_path):
    """Was: created 0644 (umask 022), prompts readable by every local user."""
    old_umask = os.umask(0o022)
    try:
        fresh, older = tmp_path / "var" / "vigil.db", tmp_path / "older.db"
        older.write_bytes(b"")
        older.chmod(0o644)  # left readable by an earlier version
        for path in (fresh, older):
            engine = make_engine(f"sqlite:///{path}")
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE t (prompt TEXT)"))
                conn.execute(text("INSERT INTO t VALUES ('secret')"))
            files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
            modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files}
            engine.dispose()
            assert modes == {f.name: 0o600 for f in files}
    finally:
        os.umask(old_umask)


def test_building_a_baseline_from_the_page_does_not_stall_other_requests():
    """Was: the build ran on the event loop; `/health` waited for it (14.5 s on a real
    window). The build here takes 2 s of blocking work."""
    started = threading.Event()

    def slow_build(start, end, now) -> int:
        started.set()
        time.sleep(2.0)  # blocking work, as reading, embedding and calibrating a window is
        return 7

    ops = BaselineOps(
        build=slow_build, validate=lambda i, now: (True, []), activate=lambda i, n: None
    )
    jobs = BaselineJobs()
    app = FastAPI()
    app.include_router(
        build_baselines_router(
            session_factory("sqlite://"), lambda: Principal("k", admin=True), ops, jobs=jobs
        )
    )
    app.add_api_route("/ping", lambda: {"ok": True})
    form = {"start": "2026-11-28T00:00:00Z", "end": "2026-11-29T00:00:00Z"}
    with UvicornThread(app) as server:
        posting = threading.Thread(
            target=httpx.post, args=(f"{server.url}/baselines/build",), kwargs={"data": form}
        )
        posting.start()
        assert started.wait(10)
        t0 = time.monotonic()
        assert httpx.get(f"{server.url}/ping", timeout=10).status_code == 200
        waited = time.monotonic() - t0
        posting.join(10)
        job = jobs.wait(1, timeout=10)
    assert waited < 1.0, f"/ping waited {waited:.1f} s behind the build"
    assert (job.state, job.outcome) == ("done", "built baseline 7 (candidate)")
