"""The engine-core process: scheduler, block manager, runner and sampler, alone with its GIL.

`run_engine_core` is the process entry point. It loads the model, says `CoreReady` (or
`CoreFailed`), then loops: take every queued command off the input socket, run one engine
step, send one `StepOutputs` with every request's new tokens and the engine's stats. It exits
on `Shutdown`, or when the API process that started it is gone.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
from dataclasses import dataclass

import zmq

from serving.engine.config import EngineConfig
from serving.engine.core_outputs import TokenDeltaProcessor
from serving.engine.identity import identify
from serving.engine.messages import (
    AbortRequests,
    AddRequest,
    Codec,
    CoreFailed,
    CoreReady,
    RequestDelta,
    RequestFailed,
    Shutdown,
    StepOutputs,
)

log = logging.getLogger("vigil.engine_core")

IDLE_POLL_MS = 500  # with nothing to do: how often to check that the parent is still there


@dataclass
class CoreLaunch:
    config: EngineConfig
    input_address: str  # the API binds; the core PULLs commands from here
    output_address: str  # the API binds; the core PUSHes outputs here
    parent_pid: int
    loaded: object | None = None  # a LoadedModel to use instead of config.model_path (tests)


def run_engine_core(launch: CoreLaunch) -> None:
    # Ctrl-C and a service manager's SIGTERM reach the whole process group: the API process
    # drains first and then sends Shutdown, so the core must not die under in-flight requests
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx = zmq.Context(io_threads=1)
    inbox = ctx.socket(zmq.PULL)
    outbox = ctx.socket(zmq.PUSH)
    outbox.setsockopt(zmq.LINGER, 2000)
    inbox.connect(launch.input_address)
    outbox.connect(launch.output_address)
    codec = Codec()
    try:
        engine = _load(launch)
    except Exception as exc:
        log.exception("engine core: could not load the model")
        outbox.send(codec.encoder.encode(CoreFailed(f"{type(exc).__name__}: {exc}")))
        outbox.close()
        ctx.term()
        return
    outbox.send(codec.encoder.encode(_ready(engine)))
    try:
        CoreLoop(engine, inbox, outbox, codec, launch.parent_pid).run()
    finally:
        engine.close()  # tensor-parallel workers: STOP, bounded join
        inbox.close(linger=0)
        outbox.close()
        ctx.term()


def _load(launch: CoreLaunch):
    from serving.engine.llm_engine import LLMEngine

    engine = LLMEngine(launch.config, loaded=launch.loaded)
    engine.output = TokenDeltaProcessor(engine.eos_token_ids, engine.max_model_len)
    return engine


def _ready(engine) -> CoreReady:
    ident = identify(engine)
    return CoreReady(
        tokenizer_pickle=pickle.dumps(engine.tokenizer), vocab_size=int(engine.model_config.vocab_size),
        max_model_len=int(engine.max_model_len), device=ident.device, dtype=ident.dtype,
        attention=ident.attention,
    )


class CoreLoop:
    def __init__(self, engine, inbox: zmq.Socket, outbox: zmq.Socket, codec: Codec, parent_pid: int):
        self.engine, self.inbox, self.outbox, self.codec = engine, inbox, outbox, codec
        self.parent_pid = parent_pid
        self.adds_seen = 0
        self.stopping = False

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.inbox, zmq.POLLIN)
        while not self.stopping:
            busy = self.engine.has_unfinished_requests()
            if not busy and not poller.poll(IDLE_POLL_MS):
                if os.getppid() != self.parent_pid:  # orphaned: the API process died
                    log.warning("engine core: the API process is gone; exiting")
                    return
                continue
            deltas: list[RequestDelta] = []
            failed: list[RequestFailed] = []
            handled = self._handle_commands(deltas, failed)
            if self.engine.has_unfinished_requests() and not self.stopping:
                self._step(deltas, failed)
            elif not handled:
                continue
            self._send(deltas, failed)

    def _handle_commands(self, deltas: list[RequestDelta], failed: list[RequestFailed]) -> bool:
        handled = False
        while True:
            try:
                raw = self.inbox.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return handled
            handled = True
            msg = self.codec.to_core.decode(raw.buffer)
            if isinstance(msg, AddRequest):
                self.adds_seen += 1
                try:
                    self.engine.add_request(msg.request_id, msg.prompt_token_ids, msg.params,
                                            arrival_time=msg.arrival_time)
                except ValueError as exc:  # checked by the API already; a race or a bug
                    failed.append(RequestFailed(msg.request_id, str(exc), True))
            elif isinstance(msg, AbortRequests):
                for rid in msg.request_ids:
                    out = self.engine.abort(rid)
                    if out is not None:
                        deltas.append(out)
            elif isinstance(msg, Shutdown):
                self.stopping = True
                for rid in list(self.engine.requests):
                    out = self.engine.abort(rid)
                    if out is not None:
                        deltas.append(out)

    def _step(self, deltas: list[RequestDelta], failed: list[RequestFailed]) -> None:
        try:
            deltas.extend(self.engine.step())
        except Exception as exc:  # keep serving: fail the requests in flight, not the process
            log.exception("engine step failed; aborting the requests in flight")
            for rid in list(self.engine.requests):
                self.engine.abort(rid)
                failed.append(RequestFailed(rid, f"{type(exc).__name__}: {exc}", False))

    def _send(self, deltas: list[RequestDelta], failed: list[RequestFailed]) -> None:
        msg = StepOutputs(deltas=deltas, stats=self.engine.stats(), adds_seen=self.adds_seen, failed=failed)
        self.outbox.send(self.codec.encoder.encode(msg), copy=False)
