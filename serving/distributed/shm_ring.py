"""One host message per step through a shared-memory ring (the driver writes, every worker reads).

A gloo broadcast over loopback TCP costs ~0.3-1 ms a message on a busy host; a write into shared
memory that the workers poll costs microseconds (bench/suites/bench_step_channel.py measures both).
The ring has SLOTS slots of `capacity` int64 each, [length, body...]; a control block holds the
writer's sequence number and one read sequence per worker, each on its own cache line. The writer
fills slot `seq % SLOTS`, then publishes `seq + 1`; it waits while the slot is still unread by some
worker. A worker polls the writer's sequence (a short spin, then sleeps backing off to 0.2 ms, so an
idle group costs almost no CPU), copies the body out, then publishes its read. A body longer than a
slot spills its tail into a gloo broadcast, announced by the length.

Ordering rests on x86's total store order (the body's stores are seen before the sequence's);
`usable()` says False elsewhere, and the step channel falls back to host_broadcast.py.
"""

from __future__ import annotations

import mmap
import os
import platform
import time
from collections.abc import Callable
from multiprocessing import shared_memory

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

SLOTS = 8
LINE = 8  # int64s per cache line
DEFAULT_CAPACITY = 8192  # int64 per slot (64 KiB): a batch-64 decode with 64-block tables fits
WRITER_WAIT_S = 300.0  # a full ring this long means a worker is gone or stuck
SPIN_S, MAX_SLEEP_S = 20e-6, 2e-4
SHM_DIR = "/dev/shm"
# what a closed ring's views become: the segment cannot be unmapped while an array views it
_RELEASED = np.zeros(0, dtype=np.int64)


def usable() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64") and os.path.isdir(SHM_DIR)


def _attach(name: str, size: int) -> mmap.mmap:
    """Map the driver's segment without multiprocessing's SharedMemory, whose resource tracker
    would unlink it when this process exits (or, shared with the driver, forget the driver's)."""
    fd = os.open(os.path.join(SHM_DIR, name.lstrip("/")), os.O_RDWR)
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def _wait(ready: Callable[[], bool], deadline: float | None = None, what: str = "") -> None:
    if ready():
        return
    start = time.perf_counter()
    while time.perf_counter() - start < SPIN_S:
        if ready():
            return
    sleep = 1e-5
    while not ready():
        time.sleep(sleep)
        sleep = min(sleep * 2, MAX_SLEEP_S)
        if deadline is not None and time.monotonic() > deadline:
            raise RuntimeError(f"step channel: {what} in time")


class ShmRing:
    def __init__(
        self, group: ProcessGroup, rank: int, world_size: int, capacity: int = DEFAULT_CAPACITY
    ):
        """Collective over `group` (gloo): rank 0 creates the segment and sends its name."""
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity}")
        self.group, self.rank, self.capacity = group, rank, capacity
        self.spills = 0
        ctl_len = LINE * world_size
        size = 8 * (ctl_len + SLOTS * capacity)
        name: list[str | None] = [None]
        self._shm: shared_memory.SharedMemory | None = None
        self._map: mmap.mmap | None = None
        buf: memoryview | mmap.mmap
        if rank == 0:  # the driver owns the segment and unlinks it at close
            self._shm = shared_memory.SharedMemory(create=True, size=size)
            name[0] = self._shm.name
        dist.broadcast_object_list(name, src=0, group=group)
        if self._shm is not None and self._shm.buf is not None:  # an open segment has a buffer
            buf = self._shm.buf
        else:
            buf = self._map = _attach(str(name[0]), size)
        self._ctl = np.ndarray((ctl_len,), dtype=np.int64, buffer=buf)
        self._slots = np.ndarray((SLOTS, capacity), dtype=np.int64, buffer=buf, offset=8 * ctl_len)
        if rank == 0:
            self._ctl[:] = 0
        self._reads = self._ctl[LINE::LINE]  # one per worker, its own cache line
        self._seq = 0
        dist.barrier(group=group)  # every worker attached before the first message

    # ---- driver ----------------------------------------------------------------------------
    def send(self, body: torch.Tensor, wait_s: float = WRITER_WAIT_S) -> torch.Tensor:
        """Publish `body` (int64, 1-D); returns it as the workers get it. Raises RuntimeError when
        the ring stays full for `wait_s`."""
        seq, reads = self._seq, self._reads
        deadline = time.monotonic() + wait_s
        _wait(lambda: int(reads.min()) > seq - SLOTS, deadline, "a worker has not read the ring")
        length = int(body.shape[0])
        room = self.capacity - 1
        inline = min(length, room)
        slot = self._slots[seq % SLOTS]
        slot[1 : 1 + inline] = body[:inline].numpy()
        slot[0] = length
        self._ctl[0] = seq + 1  # publish: after the body's stores
        self._seq = seq + 1
        if length > room:
            self.spills += 1
            dist.broadcast(body[inline:].contiguous(), src=0, group=self.group)
        return body

    # ---- workers ---------------------------------------------------------------------------
    def receive(self) -> torch.Tensor:
        seq, ctl = self._seq, self._ctl
        _wait(lambda: int(ctl[0]) > seq)
        slot = self._slots[seq % SLOTS]
        length = int(slot[0])
        room = self.capacity - 1
        head = torch.from_numpy(slot[1 : 1 + min(length, room)].copy())
        self._seq = seq + 1
        self._reads[self.rank - 1] = seq + 1  # the slot is free again
        if length <= room:
            return head
        tail = torch.empty(length - room, dtype=torch.int64)
        dist.broadcast(tail, src=0, group=self.group)
        return torch.cat([head, tail])

    def close(self) -> None:
        self._ctl = self._slots = self._reads = _RELEASED  # the views of the segment go first
        try:
            if self._map is not None:
                self._map.close()
            if self._shm is not None:
                self._shm.unlink()  # first: a view still alive elsewhere must not keep the name
                self._shm.close()
        except (BufferError, FileNotFoundError):
            pass
        self._map = self._shm = None
