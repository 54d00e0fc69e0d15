"""The app factory: `create_app(settings, engine=None, writer=None)`.

Without an engine the app loads one from settings in the background (so /health can answer 503
while it loads); without a writer it opens storage's SampleWriter from settings. What the app
creates it also closes; what it is handed, the caller owns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from serving.engine.frontend.client import EngineClient
from serving.heap import freeze_startup_heap
from serving.server.api.routes import add_routes
from serving.server.base.errors import install_error_handlers, openai_error_json
from serving.server.base.record_sink import RecordSink
from serving.server.base.server_send import ServerSend
from serving.server.base.state import Phase, ServerState
from serving.server.metrics.server_metrics import ServerMetrics
from serving.server.service.drain import DrainController, close_resources
from serving.server.service.engine_loading import follow_engine_health, load_engine, open_writer
from serving.traffic.logger import TrafficLogger
from serving.traffic.sampler import TrafficSampler
from vigil.asgi_guard import RequestGuard
from vigil.auth_throttle import throttle_from_settings
from vigil.config import Settings
from vigil.keys import KeyRing
from vigil.security_headers import SecurityHeaders, docs_urls

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    *,
    engine: EngineClient | None = None,
    writer: RecordSink | None = None,
    log_traffic: bool | None = None,
    sampler_seed: int | None = None,
    engine_loader: Callable[[Settings], EngineClient] = load_engine,
    multiprocess_metrics: str | None = None,
) -> FastAPI:
    """`engine`: a started AsyncLLMEngine to share (tests); `writer`: a SampleWriter to use;
    `log_traffic`: sample traffic into storage (default: when the sample rate or the segment
    minimum is above zero); `engine_loader`: builds and starts the engine the app owns (off the
    loop); `multiprocess_metrics`: prometheus_client's multiprocess directory, when this is one
    of several API processes (/metrics then adds up all of them)."""
    if log_traffic is None:
        log_traffic = (
            writer is not None or settings.sample_rate > 0 or settings.segment_min_per_hour > 0
        )
    owns_writer = False
    if writer is None and log_traffic:
        writer, owns_writer = open_writer(settings), True
    sampler = TrafficSampler(settings.sample_rate, settings.segment_min_per_hour, seed=sampler_seed)
    spans = None
    if settings.otlp_traces_endpoint:  # engine spans out; nothing of OpenTelemetry loads otherwise
        from serving.traffic.spans import EngineSpans

        spans = EngineSpans.from_settings(settings)
    traffic = TrafficLogger(
        sampler,
        writer if log_traffic else None,
        model_version=settings.model_version,
        spans=spans,
    )
    # the metrics read the state at scrape time, so they are built first
    metrics = ServerMetrics(
        settings.model_name,
        lambda: state.engine_stats(),
        lambda: state.sample_counters(),
        max_model_len=settings.max_model_len,
        multiprocess_dir=multiprocess_metrics,
    )
    state = ServerState(
        settings=settings,
        metrics=metrics,
        traffic=traffic,
        writer=writer,
        owns_writer=owns_writer,
        engine=engine,
    )

    def on_engine_health(up: bool) -> None:
        follow_engine_health(state, up)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loader = None
        if state.engine is None:
            loader = asyncio.create_task(_load(state, on_engine_health, engine_loader))
        else:
            state.phase = Phase.READY
            state.engine.add_health_listener(on_engine_health)
        try:
            yield
        finally:
            if loader is not None and not loader.done():
                loader.cancel()
            if state.engine is not None:
                state.engine.remove_health_listener(on_engine_health)
            await close_resources(state)

    docs = docs_urls(settings)
    app = FastAPI(
        title="Vigil",
        version="0.1.0",
        lifespan=lifespan,
        openapi_url=docs["openapi_url"],
        docs_url=docs["docs_url"],
        redoc_url=docs["redoc_url"],
        description="OpenAI-compatible inference with drift monitoring built in.",
    )
    app.state.vigil = state
    app.state.drain = DrainController(state)
    install_error_handlers(app)
    # the key is checked and the body bounded before any route reads a byte
    app.add_middleware(
        RequestGuard,
        keyring=KeyRing.from_settings(settings),
        protected=("/v1/",),
        max_bytes=settings.max_request_bytes,
        body_timeout_s=settings.body_timeout_s,
        render=openai_error_json,
        throttle=throttle_from_settings(settings),
        trusted_proxies=tuple(settings.trusted_proxies),
    )
    app.add_middleware(SecurityHeaders)  # inside ServerSend: it changes the response start only
    app.add_middleware(ServerSend)  # outside the guard: SSE body chunks skip the layers within
    add_routes(app)
    return app


async def _load(
    state: ServerState,
    on_engine_health: Callable[[bool], None],
    engine_loader: Callable[[Settings], EngineClient],
) -> None:
    try:
        engine = await asyncio.to_thread(engine_loader, state.settings)
        engine.add_health_listener(on_engine_health)
    except Exception as exc:
        log.exception("could not load the model")
        state.phase, state.load_error = Phase.FAILED, f"{type(exc).__name__}: {exc}"
        if state.request_exit is not None:
            state.request_exit()
        return
    state.engine, state.owns_engine = engine, True
    freeze_startup_heap()  # the engine client's imports and objects stay for the process's life
    if state.phase is Phase.LOADING:
        state.phase = Phase.READY
        log.info(
            "model %s ready (context %d tokens)", state.settings.model_name, state.max_model_len
        )
