"""`ParallelContext`: this process's place in the tensor-parallel group, as the layers see it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParallelContext:
    rank: int
    world_size: int
    group: Any = None  # the torch.distributed group the layers' collectives run on
    cpu_group: Any = None  # gloo group for host-side control messages (the step broadcast)
