"""What the app builds when it is handed nothing: the engine (and its asyncio front) and the
record writer, from settings; and how the app's phase follows the engine's health."""

from __future__ import annotations

import logging

from serving.engine.frontend.client import EngineClient
from serving.server.base.record_sink import RecordSink
from serving.server.base.state import Phase, ServerState
from vigil.config import Settings

log = logging.getLogger(__name__)


def load_engine(settings: Settings) -> EngineClient:
    """Build and start the paged-KV engine and its asyncio front (blocking: call off the event
    loop): its own process (`engine_process="separate"`) or a thread of this one."""
    from serving.engine import AsyncLLMEngine, EngineConfig, build_engine

    config = EngineConfig.from_settings(settings)
    engine: EngineClient
    if settings.engine_process == "separate":
        from serving.engine.frontend.core_client import EngineCoreClient

        engine = EngineCoreClient(config)
    else:
        engine = AsyncLLMEngine(build_engine(config))
    engine.start()
    return engine


def follow_engine_health(state: ServerState, up: bool) -> None:
    """The engine core died (/health 503, new requests 503) or is back after a restart."""
    if not up and state.phase is Phase.READY:
        state.phase = Phase.RECOVERING
        log.error("engine core down: /health answers 503 until it is back")
    elif up and state.phase is Phase.RECOVERING:
        state.phase = Phase.READY
        log.warning("engine core back: serving again")


def open_writer(settings: Settings) -> RecordSink:
    from storage.writer import SampleWriter

    return SampleWriter.from_settings(settings)
