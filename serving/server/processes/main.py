"""`vigil serve`: uvicorn run programmatically so that SIGTERM drains instead of killing.

First SIGTERM/SIGINT: /health goes 503, new requests get 503, in-flight requests get
`drain_grace_s` to finish, sampled traffic is flushed to storage, then the process exits 0.
A second signal forces an immediate exit.
"""

from __future__ import annotations

import logging
import os

from serving.server.base.state import Phase
from serving.server.processes.api_server_count import resolve_api_server_count
from serving.server.processes.draining_server import build_server
from vigil.config import Settings, load_settings

log = logging.getLogger("vigil.serve")


def run_server(settings: Settings, **app_kwargs) -> int:
    """Serve until drained; 0 on a clean exit, 1 if the model could not be loaded."""
    server = build_server(settings, **app_kwargs)
    server.run()
    state = server.vigil_app.state.vigil
    return 1 if state.phase is Phase.FAILED else 0


def _prepare_storage(settings: Settings) -> None:
    """Apply the migrations so sampled rows have a table (idempotent; journaled if it fails)."""
    try:
        from storage.migrate import upgrade

        upgrade(settings.database_url)
    except Exception as exc:  # the writer journals until the database is usable
        log.error("could not migrate %s: %s", settings.database_url.split("@")[-1], exc)


def serve_command(args) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    overrides = {}
    for name, field in (
        ("host", "host"),
        ("port", "port"),
        ("model", "model_path"),
        ("served_model_name", "model_name"),
        ("tensor_parallel_size", "tensor_parallel_size"),
        ("api_server_count", "api_server_count"),
    ):
        value = getattr(args, name, None)
        if value is not None:
            overrides[field] = value
    settings = load_settings(**overrides)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if settings.sample_rate > 0 or settings.segment_min_per_hour > 0:
        _prepare_storage(settings)
    count = resolve_api_server_count(settings)
    settings = settings.model_copy(update={"api_server_count": count})
    if count > 1:
        log.info("%d API server processes on port %d", count, settings.port)
        from serving.server.processes.multi_process import run_multi_process

        return run_multi_process(settings)
    return run_server(settings)
