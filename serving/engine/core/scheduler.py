"""The scheduler. One rule: each sequence's computed tokens catch up to its total tokens, within
a per-step token budget. A new prompt, a prompt's next chunk, a prefix-cache hit (its cached
tokens count as computed) and a decode step are all the same thing: `num_tokens -
num_computed_tokens` tokens to run, clipped by the budget.

Running sequences are served first, oldest first; when the KV pool can't hold a running sequence's
next tokens, the newest running sequences are preempted (blocks freed, recomputed later: their
tokens are kept, so they resume and finish). Waiting sequences are admitted (FIFO, preempted ones
first) while the budget, `max_num_seqs` and the pool allow, never in a step that preempted.
With chunked prefill off, a prompt is admitted only when all of it fits this step's budget.

The head of the waiting queue has its prefix-cache lookup done once and kept while the block
manager's cache is unchanged (`cache_version`): a head blocked for many steps costs no lookups.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from serving.engine.core.kv_blocks import KVBlocks
from serving.engine.core.request import SeqStatus, Sequence


@dataclass
class SchedulerConfig:  # no defaults here: the engine's come from the settings (EngineConfig)
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool


@dataclass(slots=True)
class ScheduledSeq:
    seq: Sequence
    num_new_tokens: int  # tokens to run this step, starting at seq.num_computed_tokens

    @property
    def completes(self) -> bool:
        """After this step the sequence is caught up, so its last row must be sampled."""
        return self.seq.num_computed_tokens + self.num_new_tokens == self.seq.num_tokens


@dataclass(slots=True)
class HeadLookup:
    """A prefix-cache lookup for one waiting sequence, valid while the sequence's length and the
    block manager's `cache_version` are those it was made at."""

    seq: Sequence
    num_tokens: int
    cache_version: int
    hits: list[Any]  # block ids (a tuple of one per group past one KV-cache group)
    hashes: list[int]


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    blocks_to_copy: list[tuple[int, int]] = field(default_factory=list)  # (src, dst) CoW copies
    preempted: list[Sequence] = field(default_factory=list)
    num_batched_tokens: int = 0

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


class Scheduler:
    def __init__(self, config: SchedulerConfig, block_manager: KVBlocks[Any]):
        self.config = config
        self.bm = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions_total = 0
        self._head: HeadLookup | None = None

    def add(self, seq: Sequence) -> None:
        seq.status = SeqStatus.WAITING
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.config.max_num_batched_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            num_new = min(seq.num_tokens - seq.num_computed_tokens, budget)
            assert num_new > 0, "a running sequence always has a token to run"
            while (copies := self.bm.try_append(seq, num_new)) is None:
                victim = self.running.pop()  # newest first
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is seq:
                    break
            else:
                if copies:
                    out.blocks_to_copy += copies
                out.scheduled.append(ScheduledSeq(seq, num_new))
                budget -= num_new
                i += 1
        if not out.preempted:
            budget = self._admit(out, budget)
        out.num_batched_tokens = self.config.max_num_batched_tokens - budget
        return out

    def _admit(self, out: SchedulerOutput, budget: int) -> int:
        while self.waiting and budget > 0:
            seq = self.waiting[0]
            # the n samples of a request run as n sequences once its prompt is done
            width = 1 if seq.request.forked else seq.request.params.n
            if self.running and len(self.running) + width > self.config.max_num_seqs:
                break
            head = self._lookup(seq)
            num_new = seq.num_tokens - len(head.hits) * self.bm.block_size
            if num_new > budget and not self.config.enable_chunked_prefill:
                break
            num_new = min(num_new, budget)
            if not self.bm.can_allocate(seq, num_new, head.hits):
                break
            self.waiting.popleft()
            self._head = None
            cached = self.bm.allocate(seq, num_new, (head.hits, head.hashes))
            if seq.num_output_tokens == 0:
                seq.request.metrics.num_cached_prompt_tokens = cached
            seq.status = SeqStatus.RUNNING
            self.running.append(seq)
            out.scheduled.append(ScheduledSeq(seq, num_new))
            budget -= num_new
        return budget

    def _lookup(self, seq: Sequence) -> HeadLookup:
        """`seq`'s prefix-cache hits: the kept lookup when still valid, else a fresh one."""
        head, version = self._head, self.bm.cache_version
        if (
            head is None
            or head.seq is not seq
            or head.num_tokens != seq.num_tokens
            or head.cache_version != version
        ):
            hits, hashes = self.bm.lookup(seq)
            head = self._head = HeadLookup(seq, seq.num_tokens, version, hits, hashes)
        return head

    def _preempt(self, seq: Sequence) -> None:
        self.bm.free(seq)
        seq.num_computed_tokens = 0
        seq.status = SeqStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions_total += 1
        seq.request.metrics.num_preemptions += 1

    def update_after_step(self, out: SchedulerOutput) -> None:
        """The step ran: its tokens are computed; register newly full blocks for prefix caching."""
        for item in out.scheduled:
            item.seq.num_computed_tokens += item.num_new_tokens
            self.bm.cache_blocks(item.seq)

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Add `child` right after `parent`, sharing its blocks."""
        self.bm.fork(parent, child)
        child.num_computed_tokens = parent.num_computed_tokens
        child.status = SeqStatus.RUNNING
        self.running.insert(self.running.index(parent) + 1, child)

    def finish(self, seq: Sequence) -> None:
        """Done or aborted: out of the queues, blocks freed at once."""
        if seq.status is SeqStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SeqStatus.WAITING:
            self.waiting.remove(seq)
            if self._head is not None and self._head.seq is seq:
                self._head = None
        self.bm.free(seq)
        seq.status = SeqStatus.FINISHED
