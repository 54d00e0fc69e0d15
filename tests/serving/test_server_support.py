"""Shared pieces for the server tests (imported by test_server_*.py; holds no tests itself).

One SmolLM2 engine per test session (`shared_engine()`), shared by every app the tests build;
`ServerThread` runs a real uvicorn server for an app on a free loopback port.
"""

from __future__ import annotations

import os
import socket
import threading
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

API_KEY = "test-key-0123456789"
OPERATOR_KEY = "test-operator-key-0123456789"  # a gateway's key: labels tenants and segments
MAX_MODEL_LEN = 512  # small: over-long prompts are cheap to build, and the KV pool stays small

_engine = None
_loaded = None
_engine_lock = threading.Lock()


def make_settings(**overrides):
    from vigil.config import load_settings

    base = dict(
        env="development",
        api_keys=[API_KEY],
        operator_keys=[OPERATOR_KEY],
        max_model_len=MAX_MODEL_LEN,
        kv_cache_memory_mb=64,
        torch_threads=1,
        sample_rate=0.0,
        segment_min_per_hour=0,
        host="127.0.0.1",
        port=8000,
        drain_grace_s=30.0,
    )
    base.update(overrides)
    return load_settings(**base)


def new_engine(**overrides):
    """A started engine over SmolLM2: AsyncLLMEngine over the session's weights (loaded once),
    or, with VIGIL_ENGINE_PROCESS=separate, an engine-core process behind EngineCoreClient."""
    global _loaded
    import torch

    from serving.engine import AsyncLLMEngine, EngineConfig, LLMEngine
    from serving.loader import load_model_files

    torch.set_num_threads(1)  # the test run shares a few cores with the other tests
    settings = make_settings(**overrides)
    config = EngineConfig.from_settings(settings)
    if settings.engine_process == "separate":
        from serving.engine.frontend.core_client import EngineCoreClient

        engine = EngineCoreClient(config)
        engine.start()
        return engine
    if _loaded is None:
        _loaded = load_model_files()
    engine = AsyncLLMEngine(LLMEngine(config, loaded=_loaded))
    engine.start()
    return engine


def shared_engine():
    """The session's engine (an EngineClient), shared by every app the server tests build."""
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = new_engine()
        return _engine


class ServerThread:
    """A real uvicorn server (with Vigil's drain handling) for `app` on 127.0.0.1:<free port>."""

    def __init__(self, app):
        import uvicorn

        from serving.server.processes.draining_server import DrainingServer

        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        self.app = app
        self.server = DrainingServer(config, app)
        # bind here, so the port is known even if the server stops again at once
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self.sock]},
            name="test-uvicorn",
            daemon=True,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started and self.thread.is_alive():
            if time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
