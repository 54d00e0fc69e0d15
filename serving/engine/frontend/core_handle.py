"""`CoreHandle`: one running engine-core process and the two ZeroMQ sockets to it.

The API process binds an input PUSH and an output PULL on fresh ipc paths, spawns the core
(which connects to both), and waits for its `CoreReady`. A restarted core gets a new handle with
new paths, so nothing meant for a dead core ever reaches its successor.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from typing import Protocol

import zmq

from serving.engine.config import EngineConfig
from serving.engine.frontend.core_process import CoreLaunch, run_engine_core
from serving.engine.frontend.messages import Codec, CoreFailed, CoreReady, ToCore


class CoreStartError(RuntimeError):
    """The engine core could not load the model or did not come up in time."""


class CoreUnavailable(RuntimeError):
    """The engine core is not taking commands (dead, or its socket is gone)."""


def push(sock: zmq.Socket, codec, msg: ToCore) -> None:
    """Send to the core without blocking; CoreUnavailable if no core takes it now."""
    try:
        sock.send(codec.encoder.encode(msg), zmq.NOBLOCK)
    except zmq.ZMQError as exc:  # zmq.Again: no core connected (it died)
        raise CoreUnavailable(f"the engine core is not reachable ({exc})") from None


class CoreChannel(Protocol):
    """What a front-end sends its requests through: a `CoreHandle` (a core it started) or an
    `attached_client.CoreLink` (sockets to the core of a parent process)."""

    def is_alive(self) -> bool: ...

    def send(self, msg: ToCore) -> None:
        """Raises CoreUnavailable if no core takes it now (never blocks)."""


class CoreHandle:
    def __init__(self, config: EngineConfig, loaded=None, generation: int = 0):
        self.generation = generation
        self.dir = tempfile.mkdtemp(prefix="vigil-core-")
        self.ctx = zmq.Context(io_threads=1)
        self.input = self.ctx.socket(zmq.PUSH)
        self.output = self.ctx.socket(zmq.PULL)
        self.input.setsockopt(zmq.LINGER, 0)
        self.output.setsockopt(zmq.LINGER, 0)
        in_addr, out_addr = f"ipc://{self.dir}/input", f"ipc://{self.dir}/output"
        self.input.bind(in_addr)
        self.output.bind(out_addr)
        self.codec = Codec()
        self._send_lock = threading.Lock()  # zmq sockets are not thread-safe
        self.closed = False
        launch = CoreLaunch(config, [in_addr], [out_addr], os.getpid(), loaded)
        ctx = multiprocessing.get_context("spawn")  # never fork a process that has threads
        self.process = ctx.Process(
            target=run_engine_core,
            args=(launch,),
            daemon=True,
            name=f"vigil-engine-core-{generation}",
        )
        self.process.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def is_alive(self) -> bool:
        return not self.closed and self.process.is_alive()

    def wait_ready(self, timeout_s: float) -> CoreReady:
        """Block until the core has loaded the model. Raises CoreStartError."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.output.poll(200):
                msg = self.codec.from_core.decode(self.output.recv())
                if isinstance(msg, CoreReady):
                    return msg
                if isinstance(msg, CoreFailed):
                    raise CoreStartError(msg.message)
            elif not self.process.is_alive():
                raise CoreStartError(
                    f"the engine core exited with code {self.process.exitcode} "
                    "before it was ready (see the log)"
                )
        raise CoreStartError(f"the engine core was not ready within {timeout_s:.0f}s")

    def send(self, msg: ToCore) -> None:
        """Raises CoreUnavailable if the core cannot take it now (never blocks)."""
        with self._send_lock:
            if self.closed:
                raise CoreUnavailable("the engine core is stopped")
            push(self.input, self.codec, msg)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Wait for the process to exit (after a Shutdown), kill it past `timeout_s`."""
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.close()

    def close(self) -> None:
        with self._send_lock:
            if self.closed:
                return
            self.closed = True
            self.input.close(linger=0)
            self.output.close(linger=0)
            self.ctx.term()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir, ignore_errors=True)
