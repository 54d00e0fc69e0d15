"""The sidecar's app alone (ingest API, no scheduler) for bench_scale, in its own process so
the benchmark's client does not share its interpreter:
`python -m bench.targets.scale_server URL PORT`."""

from __future__ import annotations

import sys

import uvicorn

from sidecar.app import create_app
from storage.db import session_factory
from vigil.config import load_settings

if __name__ == "__main__":
    url, port = sys.argv[1], int(sys.argv[2])
    settings = load_settings(database_url=url)
    uvicorn.run(
        create_app(settings, session_factory(url)),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        access_log=False,
    )
