"""Server time of the overview and its chart data with 30 days of hourly drift runs, on SQLite
and PostgreSQL (a measurement, not a test):

    .venv/bin/python tests/dashboards/measure_overview_load.py [sqlite|postgresql] ...

Seeds 720 hourly runs x (9 + 36) results, 100 samples an hour (72 000) and their judge scores,
then times each request in-process (TestClient: no network), median of 5 after one warm-up.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "support")]

from fastapi.testclient import TestClient  # noqa: E402
from seed_history import seed_history  # noqa: E402
from sidecar_servers import API_KEY  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from sidecar.app import create_app  # noqa: E402
from storage.db import session_factory  # noqa: E402
from storage.migrate import upgrade  # noqa: E402
from storage.models import DriftResult, DriftRun  # noqa: E402
from vigil.config import load_settings  # noqa: E402

PATHS = ("/?range=30d", "/api/v1/series?kind=drift&range=30d", "/api/v1/series?kind=eval&range=30d",
         "/api/v1/series?kind=traffic&range=30d", "/api/v1/series?kind=drift&range=24h", "/metrics")


def database(backend: str, tmp: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp}/bench.db"
    import psycopg

    schema = f"bench_{random.randrange(10**9)}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"


def main(backend: str) -> None:
    tmp = tempfile.mkdtemp()
    url = database(backend, tmp)
    upgrade(url)
    factory = session_factory(url)
    started = time.perf_counter()
    with factory() as s:
        seed_history(s, hours=720, samples_per_hour=100)
        rng = random.Random(1)
        run_ids = [r for (r,) in s.query(DriftRun.id)]
        extra = [dict(run_id=rid, test="psi", feature=f"feature_{k}", segment=seg, statistic=rng.random() * 0.1,
                      threshold=0.2, drifted=False, insufficient=False, detail={})
                 for rid in run_ids for k in range(12) for seg in ("*", "web", "api")]
        s.execute(insert(DriftResult), extra)
        s.commit()
    print(f"{backend}: seeded in {time.perf_counter() - started:.1f}s", flush=True)
    settings = load_settings(database_url=url, api_keys=[API_KEY], report_dir=tmp, journal_dir=tmp)
    client = TestClient(create_app(settings, factory))
    headers = {"Authorization": f"Bearer {API_KEY}"}
    for path in PATHS:
        client.get(path, headers=headers)
        times, size = [], 0
        for _ in range(5):
            t0 = time.perf_counter()
            r = client.get(path, headers=headers)
            times.append(time.perf_counter() - t0)
            assert r.status_code == 200, (path, r.status_code)
            size = len(r.content)
        print(f"{backend} {path}: median {statistics.median(times) * 1000:.0f} ms, {size / 1024:.0f} KiB", flush=True)


if __name__ == "__main__":
    for name in sys.argv[1:] or ["sqlite", "postgresql"]:
        main(name)
