"""What one running API server holds: settings, engine, metrics, traffic logger, lifecycle phase."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from serving.engine.frontend.client import EngineClient
from serving.outputs import EngineStats
from serving.server.base.record_sink import RecordSink
from serving.server.metrics.server_metrics import SampleCounters, ServerMetrics
from serving.traffic.logger import TrafficLogger
from vigil.config import Settings


class Phase(enum.Enum):
    LOADING = "loading"  # the model is being loaded: /health 503, /v1 503
    READY = "ready"
    RECOVERING = "recovering"  # the engine-core process died and is being restarted: 503
    DRAINING = "draining"  # SIGTERM seen: in-flight requests finish, new ones get 503
    STOPPED = "stopped"
    FAILED = "failed"  # the model could not be loaded


@dataclass
class ServerState:
    settings: Settings
    metrics: ServerMetrics
    traffic: TrafficLogger
    writer: RecordSink | None = None  # storage's SampleWriter (or None: sampling off)
    owns_writer: bool = False
    engine: EngineClient | None = None  # once loaded
    owns_engine: bool = False
    phase: Phase = Phase.LOADING
    load_error: str | None = None
    inflight: set[str] = field(default_factory=set)  # engine request ids being generated
    # admitted, not yet handed to the engine (their stream has not started): counted as waiting
    reserved: set[str] = field(default_factory=set)
    # set by the runner (uvicorn wrapper): ask the HTTP server to stop once drained
    request_exit: Callable[[], None] | None = None
    closed: bool = False
    started_at: float = field(default_factory=time.time)

    @property
    def tokenizer(self) -> Any:
        return self.loaded_engine().tokenizer

    @property
    def max_model_len(self) -> int:
        return int(self.loaded_engine().max_model_len)

    def loaded_engine(self) -> EngineClient:
        if self.engine is None:
            raise RuntimeError("the engine is not loaded yet")
        return self.engine

    def engine_stats(self) -> EngineStats | None:
        return self.engine.stats() if self.engine is not None else None

    def sample_counters(self) -> SampleCounters:
        t = self.traffic.counters
        counters = SampleCounters(sampled=t.sampled, dropped=t.dropped)
        w = self.writer
        if w is not None:
            # committed directly, or later from the journal once the database was back
            counters.logged = w.written + w.replayed
            counters.journaled = w.journaled
            # refused as invalid, or lost because even the journal was unwritable
            counters.dropped += w.dropped + w.rejected
        return counters
