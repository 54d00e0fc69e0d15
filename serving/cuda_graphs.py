"""The GPU forward path: fused-kernel forward, with decode steps replayed from CUDA graphs.

Decode batches are padded up to a bucket (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, ...) and run
from a graph captured once per bucket, on first use. The step's tensors live in fixed buffers
the graphs read: each replay copies the step's ids, positions, slots, lengths and block tables
into them. Padded rows have seq_len 0 and slot -1, so they write nothing and read nothing.
The decode kernel's split count comes from `max_seq_len_hint`, fixed at capture.

The runner hook: `GpuForward(model, kv_caches, backend, ...)`, then `.forward(ids, pos, meta)`
in place of `model(ids, pos, kv_caches, meta, backend)`.
"""

from __future__ import annotations

import gc

import torch

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.kernels.fused_forward import fused_forward

DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)


class GpuForward:
    def __init__(
        self,
        model: torch.nn.Module,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        backend: AttentionBackend,
        *,
        max_batch: int = 256,
        max_blocks_per_seq: int,
        max_seq_len_hint: int,
        use_graphs: bool = True,
        use_fused: bool = True,
        buckets: tuple[int, ...] = DEFAULT_BUCKETS,
    ):
        self.model = model
        self.kv_caches = kv_caches
        self.backend = backend
        self.use_fused = use_fused
        self.use_graphs = use_graphs
        self.buckets = tuple(b for b in buckets if b < max_batch) + (max_batch,)
        self.max_batch = max_batch
        self.max_seq_len_hint = max_seq_len_hint
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._pool = None
        if use_graphs:
            device = kv_caches[0][0].device
            i32 = {"dtype": torch.int32, "device": device}
            self.input_ids = torch.zeros(max_batch, dtype=torch.int64, device=device)
            self.positions = torch.zeros(max_batch, dtype=torch.int64, device=device)
            self.slot_mapping = torch.full((max_batch,), -1, dtype=torch.int64, device=device)
            self.seq_lens = torch.zeros(max_batch, **i32)
            self.block_tables = torch.zeros(max_batch, max_blocks_per_seq, **i32)
            self.query_start_loc = torch.arange(max_batch + 1, **i32)

    @classmethod
    def for_runner(cls, runner, max_batch: int = 512) -> GpuForward:
        """The engine's hook: sized from the runner's cache (block tables up to the model's
        context) and the model config (the split-count hint)."""
        num_blocks, block_size = runner.kv_cache.shape[2], runner.block_size
        max_len = min(runner.config.max_position_embeddings, num_blocks * block_size)
        return cls(
            runner.model,
            runner.kv_caches,
            runner.backend,
            max_batch=max_batch,
            max_blocks_per_seq=-(-max_len // block_size),
            max_seq_len_hint=max_len,
        )

    def _eager(self, input_ids, positions, meta: AttentionMetadata) -> torch.Tensor:
        if self.use_fused:
            return fused_forward(self.model, input_ids, positions, self.kv_caches, meta, self.backend)
        return self.model(input_ids, positions, self.kv_caches, meta, self.backend)

    def _bucket(self, n: int) -> int | None:
        for b in self.buckets:
            if b >= n:
                return b
        return None

    def _static_meta(self, b: int) -> AttentionMetadata:
        return AttentionMetadata(
            query_start_loc=self.query_start_loc[: b + 1],
            seq_lens=self.seq_lens[:b],
            slot_mapping=self.slot_mapping[:b],
            block_tables=self.block_tables[:b],
            max_query_len=1,
            max_seq_len=self.max_seq_len_hint,
            num_decode_tokens=b,
        )

    def _capture(self, b: int) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        meta = self._static_meta(b)
        ids, pos = self.input_ids[:b], self.positions[:b]
        self.seq_lens[:b].fill_(0)  # warm-up and capture read and write nothing
        self.slot_mapping[:b].fill_(-1)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # compile kernels, set up cuBLAS, outside the capture
            for _ in range(2):
                self._eager(ids, pos, meta)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = self._eager(ids, pos, meta)
        self._pool = graph.pool()
        return graph, out

    def capture_up_to(self, batch: int) -> int:
        """Capture every decode bucket a batch of up to `batch` sequences uses, now: at start-up,
        not in the first steps of each size, where the first requests of a fresh server would
        wait for the captures (and the one-token GEMV's autotuning). Returns how many."""
        if not self.use_graphs:
            return 0
        top = self._bucket(min(batch, self.max_batch))
        for b in self.buckets:
            if b > top:
                break
            if b not in self.graphs:
                self.graphs[b] = self._capture(b)
        return len(self.graphs)

    def release_graphs(self) -> None:
        """Free the captured graphs and their pool. Must precede leaving an NCCL group: a
        communicator whose collectives live in a graph cannot finalize or abort until the graph
        is gone."""
        torch.cuda.synchronize()
        self.graphs.clear()
        self._pool = None
        gc.collect()
        torch.cuda.synchronize()

    @torch.inference_mode()
    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata
    ) -> torch.Tensor:
        n = input_ids.shape[0]
        b = self._bucket(n) if self.use_graphs and meta.is_decode_only else None
        if b is None or meta.block_tables.shape[1] > self.block_tables.shape[1]:
            return self._eager(input_ids, positions, meta)
        if b not in self.graphs:
            self.graphs[b] = self._capture(b)
        graph, out = self.graphs[b]
        self.input_ids[:n].copy_(input_ids)
        self.positions[:n].copy_(positions)
        self.slot_mapping[:n].copy_(meta.slot_mapping)
        self.seq_lens[:n].copy_(meta.seq_lens)
        width = meta.block_tables.shape[1]
        self.block_tables[:n, :width].copy_(meta.block_tables)
        if b > n:
            self.slot_mapping[n:b].fill_(-1)
            self.seq_lens[n:b].fill_(0)
        graph.replay()
        return out[:n]
