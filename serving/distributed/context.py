"""`ParallelContext`: this process's place in the tensor-parallel group, as the layers see it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class ParallelContext:
    rank: int
    world_size: int
    group: Any = None  # the torch.distributed group the layers' collectives run on
    cpu_group: Any = None  # gloo group for host-side control messages (the step broadcast)
    reducer: Any = None  # all_reduce.py's choice (None: dist.all_reduce on `group`)

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        """The sum over ranks of `t`: in place, or a new tensor (symmetric memory)."""
        if self.reducer is not None:
            reduced: torch.Tensor = self.reducer(t)
            return reduced
        dist.all_reduce(t, group=self.group)
        return t

    @property
    def all_reduce_name(self) -> str:
        return getattr(self.reducer, "name", "default")
