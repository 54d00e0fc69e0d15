"""The engine-core process: scheduler, block manager, runner and sampler, alone with its GIL.

`run_engine_core` is the process entry point. It loads the model, says `CoreReady` (or
`CoreFailed`), then loops: take every queued command off the input socket, run one engine
step, send one `StepOutputs` with every request's new tokens and the engine's stats. It exits
on `Shutdown`, or when the process that started it is gone. With several API processes
(`VIGIL_API_SERVER_COUNT`), it reads the commands of all of them and sends each one the outputs
of the requests it added, with the stats.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import zmq

from serving.engine.config import EngineConfig
from serving.engine.frontend.identity import identify
from serving.engine.frontend.messages import (
    AbortRequests,
    AddRequest,
    Codec,
    CoreFailed,
    CoreReady,
    RequestDelta,
    RequestFailed,
    Shutdown,
    StepOutputs,
    TokenRows,
)
from serving.engine.frontend.token_deltas import token_deltas
from serving.heap import freeze_startup_heap

if TYPE_CHECKING:
    from serving.engine.engine.llm_engine import LLMEngine
    from serving.engine.engine.runner_setup import ModelInput

log = logging.getLogger("vigil.engine_core")

IDLE_POLL_MS = 500  # with nothing to do: how often to check that the parent is still there


@dataclass
class CoreLaunch:
    config: EngineConfig
    # the API side binds these; the core PULLs commands from every input (fair-queued) and
    # PUSHes each request's outputs to the output of the API process that added it
    input_addresses: list[str]
    output_addresses: list[str]
    parent_pid: int
    loaded: ModelInput | None = None  # a LoadedModel to use instead of config.model_path (tests)
    generation: int = 0
    ready: Any = None  # a multiprocessing Event set once the model is loaded (the parent waits)


def run_engine_core(launch: CoreLaunch) -> None:
    # Ctrl-C and a service manager's SIGTERM reach the whole process group: the API process
    # drains first and then sends Shutdown, so the core must not die under in-flight requests
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ctx = zmq.Context(io_threads=1)
    inbox = ctx.socket(zmq.PULL)
    for address in launch.input_addresses:
        inbox.connect(address)
    outboxes = []
    for address in launch.output_addresses:
        outbox = ctx.socket(zmq.PUSH)
        outbox.setsockopt(zmq.LINGER, 2000 if len(launch.output_addresses) == 1 else 200)
        outbox.connect(address)
        outboxes.append(outbox)
    codec = Codec()
    try:
        engine = _load(launch)
    except Exception as exc:
        log.exception("engine core: could not load the model")
        for outbox in outboxes:
            outbox.send(codec.encoder.encode(CoreFailed(f"{type(exc).__name__}: {exc}")))
            outbox.close()
        ctx.term()
        return
    # the model, tokenizer and engine live as long as the process: out of every full collection,
    # which would otherwise stall every stream for a quarter of a second
    frozen = freeze_startup_heap()
    ready = codec.encoder.encode(_ready(engine, launch.generation, frozen))
    for outbox in outboxes:
        outbox.send(ready)
    if launch.ready is not None:
        launch.ready.set()
    try:
        CoreLoop(engine, inbox, outboxes, codec, launch.parent_pid).run()
    finally:
        engine.close()  # tensor-parallel shard processes: STOP, bounded join
        inbox.close(linger=0)
        for outbox in outboxes:
            outbox.close()
        ctx.term()


def _load(launch: CoreLaunch) -> LLMEngine[RequestDelta]:
    from serving.engine.engine.build import build_engine

    return build_engine(launch.config, launch.loaded, output=token_deltas())


def _ready(engine, generation: int, frozen_objects: int) -> CoreReady:
    ident = identify(engine)
    return CoreReady(
        tokenizer_pickle=pickle.dumps(engine.tokenizer),
        vocab_size=int(engine.model_config.vocab_size),
        max_model_len=int(engine.max_model_len),
        device=ident.device,
        dtype=ident.dtype,
        attention=ident.attention,
        generation=generation,
        pid=os.getpid(),
        frozen_objects=frozen_objects,
    )


class CoreLoop:
    def __init__(
        self, engine, inbox: zmq.Socket, outboxes: list[zmq.Socket], codec: Codec, parent_pid: int
    ):
        self.engine, self.inbox, self.outboxes, self.codec = engine, inbox, outboxes, codec
        self.parent_pid = parent_pid
        self.adds_seen = [0] * len(outboxes)  # per API process: the AddRequests handled
        self.owner: dict[str, int] = {}  # request id -> the API process that added it
        self.stopping = False

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.inbox, zmq.POLLIN)
        while not self.stopping:
            busy = self.engine.has_unfinished_requests()
            if not busy and not poller.poll(IDLE_POLL_MS):
                if os.getppid() != self.parent_pid:  # orphaned: the API process died
                    log.warning("engine core: the process that started it is gone; exiting")
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
                self.adds_seen[msg.client_index] += 1
                if len(self.outboxes) > 1:
                    self.owner[msg.request_id] = msg.client_index
                try:
                    self.engine.add_request(
                        msg.request_id,
                        msg.prompt_token_ids,
                        msg.params,
                        arrival_time=msg.arrival_time,
                    )
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
        stats = self.engine.stats()
        rows = self.engine.output.take_rows()
        if len(self.outboxes) == 1:
            msg = StepOutputs(
                deltas=deltas, stats=stats, adds_seen=self.adds_seen[0], failed=failed, rows=rows
            )
            self.outboxes[0].send(self.codec.encoder.encode(msg), copy=False)
            return
        routed = route(self.owner, deltas, failed, len(self.outboxes))
        routed_rows = route_rows(self.owner, rows, len(self.outboxes))
        for index, outbox in enumerate(self.outboxes):
            own_deltas, own_failed = routed[index]
            own_rows = routed_rows[index]
            msg = StepOutputs(
                deltas=own_deltas,
                stats=stats,
                adds_seen=self.adds_seen[index],
                failed=own_failed,
                rows=own_rows,
            )
            data = self.codec.encoder.encode(msg)
            if own_deltas or own_failed or own_rows is not None:
                outbox.send(data, copy=False)  # its streams wait on it: backpressure, as with one
            else:
                # stats only: an API process that drained and exited reads nothing any more,
                # and must never stall the others' steps
                with contextlib.suppress(zmq.Again):
                    outbox.send(data, zmq.NOBLOCK, copy=False)


def route(
    owner: dict[str, int], deltas: list[RequestDelta], failed: list[RequestFailed], n: int
) -> list[tuple[list[RequestDelta], list[RequestFailed]]]:
    """Split a step's outputs by the API process that added each request; forget finished ones."""
    routed: list[tuple[list[RequestDelta], list[RequestFailed]]] = [([], []) for _ in range(n)]
    for delta in deltas:
        index = owner.pop(delta.request_id, 0) if delta.finished else owner.get(delta.request_id, 0)
        routed[index][0].append(delta)
    for failure in failed:
        routed[owner.pop(failure.request_id, 0)][1].append(failure)
    return routed


def route_rows(owner: dict[str, int], rows: TokenRows | None, n: int) -> list[TokenRows | None]:
    """Split a step's rows by the API process that added each request (rows never finish one)."""
    if rows is None:
        return [None] * n
    routed = [TokenRows() for _ in range(n)]
    for entry in rows.entries():
        routed[owner.get(entry[0], 0)].add(*entry)
    return [r if r.request_ids else None for r in routed]
