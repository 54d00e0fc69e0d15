"""The worker processes of one tensor-parallel group, seen from the driver (rank 0).

Workers are plain subprocesses (`python -m serving.distributed.worker`), not multiprocessing
children: the engine core that drives them may itself be a daemon process, which multiprocessing
forbids to have children. Each worker gets a pair of pipes for start-up messages (its launch
description, its "loaded"/"ready"/"failed" reports); the model's traffic goes over
torch.distributed. Every wait has a deadline and checks that the workers are still alive, so a
worker that dies or hangs turns into an error naming its rank instead of a hang.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from serving.distributed.group import NCCL_ENV
from serving.distributed.source import ModelSource

if TYPE_CHECKING:  # the engine starts the launcher; its config type is read for the checker only
    from serving.engine.config import EngineConfig

JOIN_TIMEOUT_S = 10.0


@dataclass
class WorkerLaunch:
    rank: int
    world_size: int
    port: int
    config: EngineConfig
    source: ModelSource
    init_timeout_s: float
    parent_pid: int


class WorkerStartError(RuntimeError):
    """A tensor-parallel worker failed, died or timed out while starting."""


class WorkerProcesses:
    def __init__(self, launches: list[WorkerLaunch]):
        self.procs: list[subprocess.Popen[bytes]] = []
        self.conns: list[tuple[Connection, Connection]] = []  # (to worker, from worker)
        env = {**os.environ, **NCCL_ENV}
        try:
            for launch in launches:
                to_r, to_w = os.pipe()
                from_r, from_w = os.pipe()
                cmd = [sys.executable, "-m", "serving.distributed.worker", str(to_r), str(from_w)]
                proc = subprocess.Popen(cmd, pass_fds=(to_r, from_w), env=env)
                os.close(to_r)
                os.close(from_w)
                self.procs.append(proc)
                self.conns.append(
                    (Connection(to_w, readable=False), Connection(from_r, writable=False))
                )
                # plain pickle: torch's multiprocessing reducers would pass tensors as shared
                # memory handles, which only multiprocessing children can open
                self.conns[-1][0].send_bytes(pickle.dumps(launch))
        except BaseException:
            self.kill()
            raise

    def send_all(self, message: object) -> None:
        for to_worker, _ in self.conns:
            to_worker.send(message)

    def wait_all(self, expected: str, timeout_s: float) -> None:
        """Wait for every worker's `expected` report; raise WorkerStartError on a failure report,
        a dead worker or the deadline."""
        deadline = time.monotonic() + timeout_s
        for rank, ((_, from_worker), proc) in enumerate(
            zip(self.conns, self.procs, strict=True), start=1
        ):
            while not from_worker.poll(0.2):
                if proc.poll() is not None:
                    raise WorkerStartError(
                        f"tensor-parallel worker rank {rank} exited with code {proc.returncode}"
                    )
                if time.monotonic() > deadline:
                    raise WorkerStartError(
                        f"tensor-parallel worker rank {rank} did not report {expected!r} within "
                        f"{timeout_s:.0f} s"
                    )
            try:
                kind, detail = from_worker.recv()
            except EOFError:
                raise WorkerStartError(
                    f"tensor-parallel worker rank {rank} closed its pipe while starting"
                ) from None
            if kind == "failed":
                raise WorkerStartError(detail)
            if kind != expected:
                raise WorkerStartError(
                    f"tensor-parallel worker rank {rank}: expected {expected!r}, got {kind!r}"
                )

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def join(self, timeout_s: float = JOIN_TIMEOUT_S) -> None:
        """Wait for the workers to exit after STOP; kill the ones still running at the deadline."""
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close_pipes()

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for a, b in self.conns:
            a.close()
            b.close()
        self.conns = []
