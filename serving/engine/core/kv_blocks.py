"""`KVBlocks`: the block manager as the scheduler and the engine drive it: one `BlockManager`
(one KV-cache group) or a `KVCacheCoordinator` (one manager per group) alike. `Hit` is what a
prefix-cache lookup finds per block: a block id, or one id per group."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from serving.engine.core.request import Sequence

Hit = TypeVar("Hit")


class KVBlocks(Protocol[Hit]):
    block_size: int

    @property
    def cache_version(self) -> int:
        """Bumped whenever the prefix cache changes: a lookup made before is stale."""
        ...

    @property
    def usage(self) -> float: ...

    @property
    def prefix_queries(self) -> int: ...

    @property
    def prefix_hits(self) -> int: ...

    def lookup(self, seq: Sequence) -> tuple[list[Hit], list[int]]:
        """The cached prefix blocks of `seq` and the hash chain of its full blocks."""
        ...

    def can_allocate(
        self, seq: Sequence, num_new_tokens: int, hits: list[Hit] | None = None
    ) -> bool: ...

    def allocate(
        self,
        seq: Sequence,
        num_new_tokens: int,
        hit: tuple[list[Hit], list[int]] | None = None,
    ) -> int: ...

    def try_append(self, seq: Sequence, num_new_tokens: int) -> list[Any] | None:
        """The block copies to do, or None when the pool can't hold the new tokens."""
        ...

    def fork(self, parent: Sequence, child: Sequence) -> None: ...

    def free(self, seq: Sequence) -> None: ...

    def cache_blocks(self, seq: Sequence) -> None: ...
