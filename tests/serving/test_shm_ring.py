"""The shared-memory ring (serving/distributed/shm_ring.py) beyond the step channel's round trips:
a worker that stops reading makes the driver's send fail after its wait, not hang (the close of
an engine with a stuck worker relies on it)."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch
import torch.distributed as dist

from serving.distributed import shm_ring
from serving.distributed.group import free_port


def _idle_reader(port: int, conn) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2)
    ring = shm_ring.ShmRing(dist.new_group(backend="gloo"), 1, 2, capacity=64)
    conn.recv()  # reads nothing until told to leave
    ring.close()
    dist.destroy_process_group()


@pytest.mark.skipif(not shm_ring.usable(), reason="the shared-memory ring needs x86")
def test_a_full_ring_raises_instead_of_waiting_forever():
    port = free_port()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_idle_reader, args=(port, child), daemon=True)
    proc.start()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2)
    try:
        ring = shm_ring.ShmRing(dist.new_group(backend="gloo"), 0, 2, capacity=64)
        for i in range(shm_ring.SLOTS):  # room for SLOTS unread messages
            ring.send(torch.full((5,), i, dtype=torch.int64), wait_s=0.2)
        with pytest.raises(RuntimeError, match="has not read"):
            ring.send(torch.zeros(5, dtype=torch.int64), wait_s=0.2)
        ring.close()
        parent.send("leave")
        proc.join(10)
    finally:
        dist.destroy_process_group()
        if proc.is_alive():
            proc.kill()
