"""One host message per broadcast: a fixed-capacity int64 buffer carrying a header and payload.

Every message is one gloo broadcast of the whole buffer, whatever its size (on loopback TCP a
broadcast costs about the same for 16 and 8192 elements, so the old header-then-payload pair cost
two latencies). A payload longer than the buffer's room spills its tail into a second broadcast,
which the receivers expect from the length in the header.

Layout of the buffer: [length, body...]; the body is whatever the caller packs (step_channel.py:
a header, then the step's tensors).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

DEFAULT_CAPACITY = 8192  # int64 elements (64 KiB): a batch-64 decode with 64-block tables fits


class HostBroadcast:
    def __init__(self, group: ProcessGroup, capacity: int = DEFAULT_CAPACITY):
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity}")
        self.group = group
        self.capacity = capacity
        self._buf = torch.zeros(capacity, dtype=torch.int64)
        self.spills = 0  # messages that needed a second broadcast (benchmarks report it)

    def send(self, body: torch.Tensor, wait_s: float | None = None) -> torch.Tensor:
        """Broadcast `body` (int64, 1-D) from rank 0; returns it as the receivers get it (a fresh
        tensor, not the reused buffer). `wait_s` is not used: gloo's own timeout applies."""
        length = int(body.shape[0])
        buf = self._buf
        room = self.capacity - 1
        inline = min(length, room)
        buf[0] = length
        buf[1 : 1 + inline] = body[:inline]
        dist.broadcast(buf, src=0, group=self.group)
        if length <= room:
            return buf[1 : 1 + length].clone()
        self.spills += 1
        tail = body[inline:].contiguous()
        dist.broadcast(tail, src=0, group=self.group)
        return torch.cat([buf[1:], tail])

    def close(self) -> None:
        pass

    def receive(self) -> torch.Tensor:
        """The next message body from rank 0 (blocks until it arrives)."""
        buf = self._buf
        dist.broadcast(buf, src=0, group=self.group)
        length = int(buf[0])
        room = self.capacity - 1
        if length <= room:
            return buf[1 : 1 + length].clone()
        tail = torch.empty(length - room, dtype=torch.int64)
        dist.broadcast(tail, src=0, group=self.group)
        return torch.cat([buf[1:], tail])
