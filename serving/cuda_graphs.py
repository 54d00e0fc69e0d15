"""The GPU forward path: fused-kernel forward, with decode steps replayed from CUDA graphs.

Decode batches are padded up to a bucket (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, ...) and run
from a graph captured once per bucket, on first use. The step's tensors live in fixed buffers
the graphs read: each replay copies the step's ids, positions, slots, lengths and block tables
into them. Padded rows have seq_len 0 and slot -1, so they write nothing and read nothing.
The decode kernel's split count comes from `max_seq_len_hint`, fixed at capture.

A step that is one sequence's prefill (a lone prompt, or one chunk of it) of up to 512 tokens
is replayed from a graph too, its tokens padded up to a prefill bucket (16, 32, ..., 512) with
slot -1 and no sequence: eagerly, such a step is ~330 kernel launches whose host time (~13 ms for
Qwen3-4B on an H200, against ~3 ms of GPU work) was a lone request's time to first token. Padded
rows compute garbage that no real row reads (every kernel but attention is row-wise, and
attention reads only the sequence's rows). Steps of several sequences run eagerly.

The runner hook: `GpuForward(model, kv_caches, backend, ...)`, then `.forward(ids, pos, meta)`
in place of `model(ids, pos, kv_caches, meta, backend)`.
"""

from __future__ import annotations

import gc

import torch

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.kernels.fused_forward import fused_forward

DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)
PREFILL_BUCKETS = (16, 32, 64, 128, 256, 512)  # tokens of a one-sequence prefill step


def prefill_bucket(meta: AttentionMetadata, num_tokens: int, buckets: tuple[int, ...]) -> int | None:
    """The prefill graph a step replays: one sequence, every row of it a query (no decode row),
    at most the largest bucket; None for any other step."""
    if meta.num_seqs != 1 or meta.num_decode_tokens or num_tokens < 2 or meta.max_query_len != num_tokens:
        return None
    return next((b for b in buckets if b >= num_tokens), None)


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
        prefill_buckets: tuple[int, ...] = PREFILL_BUCKETS,
    ):
        self.model = model
        self.kv_caches = kv_caches
        self.backend = backend
        self.use_fused = use_fused
        self.use_graphs = use_graphs
        self.buckets = tuple(b for b in buckets if b < max_batch) + (max_batch,)
        self.max_batch = max_batch
        self.max_seq_len_hint = max_seq_len_hint
        self.prefill_buckets = prefill_buckets
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.prefill_graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._pool = None
        if use_graphs:
            device = kv_caches[0][0].device
            i32 = {"dtype": torch.int32, "device": device}
            rows = max(max_batch, *prefill_buckets) if prefill_buckets else max_batch
            self.input_ids = torch.zeros(rows, dtype=torch.int64, device=device)
            self.positions = torch.zeros(rows, dtype=torch.int64, device=device)
            self.slot_mapping = torch.full((rows,), -1, dtype=torch.int64, device=device)
            self.seq_lens = torch.zeros(max_batch, **i32)
            self.block_tables = torch.zeros(max_batch, max_blocks_per_seq, **i32)
            self.query_start_loc = torch.arange(max_batch + 1, **i32)
            self.prefill_query_start_loc = torch.zeros(2, **i32)  # [0, the prompt's tokens]

    @classmethod
    def for_runner(cls, runner, max_batch: int = 512) -> GpuForward:
        """The engine's hook: sized from the runner's cache (block tables up to the model's
        context) and the model config (the split-count hint)."""
        num_blocks, block_size = runner.kv_cache.shape[2], runner.block_size
        max_len = min(runner.config.max_position_embeddings, num_blocks * block_size)
        # tensor parallel: no prefill graphs (their collectives are not exercised on 2 GPUs here)
        parallel = any(hasattr(m, "reduce") for m in runner.model.modules())
        return cls(
            runner.model,
            runner.kv_caches,
            runner.backend,
            max_batch=max_batch,
            max_blocks_per_seq=-(-max_len // block_size),
            max_seq_len_hint=max_len,
            prefill_buckets=() if parallel else PREFILL_BUCKETS,
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

    def _prefill_meta(self, b: int) -> AttentionMetadata:
        return AttentionMetadata(
            query_start_loc=self.prefill_query_start_loc,
            seq_lens=self.seq_lens[:1],
            slot_mapping=self.slot_mapping[:b],
            block_tables=self.block_tables[:1],
            max_query_len=b,
            max_seq_len=self.max_seq_len_hint,
        )

    def _capture(self, b: int, prefill: bool = False) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        meta = self._prefill_meta(b) if prefill else self._static_meta(b)
        ids, pos = self.input_ids[:b], self.positions[:b]
        self.seq_lens[:b].fill_(0)  # warm-up and capture read and write nothing
        self.slot_mapping[:b].fill_(-1)
        self.prefill_query_start_loc.fill_(0)
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
        wait for the captures (and the one-token GEMV's configuration timing). Returns how many."""
        if not self.use_graphs:
            return 0
        top = self._bucket(min(batch, self.max_batch))
        for b in self.buckets:
            if b > top:
                break
            if b not in self.graphs:
                self.graphs[b] = self._capture(b)
        for b in self.prefill_buckets:
            if b not in self.prefill_graphs:
                self.prefill_graphs[b] = self._capture(b, prefill=True)
        return len(self.graphs) + len(self.prefill_graphs)

    def release_graphs(self) -> None:
        """Free the captured graphs and their pool. Must precede leaving an NCCL group: a
        communicator whose collectives live in a graph cannot finalize or abort until the graph
        is gone."""
        torch.cuda.synchronize()
        self.graphs.clear()
        self.prefill_graphs.clear()
        self._pool = None
        gc.collect()
        torch.cuda.synchronize()

    @torch.inference_mode()
    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata
    ) -> torch.Tensor:
        n = input_ids.shape[0]
        if not self.use_graphs or meta.block_tables.shape[1] > self.block_tables.shape[1]:
            return self._eager(input_ids, positions, meta)
        if meta.is_decode_only:
            b = self._bucket(n)
            if b is None:
                return self._eager(input_ids, positions, meta)
            if b not in self.graphs:
                self.graphs[b] = self._capture(b)
            graph, out = self.graphs[b]
        else:
            b = prefill_bucket(meta, n, self.prefill_buckets)
            if b is None:
                return self._eager(input_ids, positions, meta)
            if b not in self.prefill_graphs:
                self.prefill_graphs[b] = self._capture(b, prefill=True)
            graph, out = self.prefill_graphs[b]
            self.prefill_query_start_loc.copy_(meta.query_start_loc)
        self.input_ids[:n].copy_(input_ids)
        self.positions[:n].copy_(positions)
        self.slot_mapping[:n].copy_(meta.slot_mapping)
        rows = meta.num_seqs
        self.seq_lens[:rows].copy_(meta.seq_lens)
        width = meta.block_tables.shape[1]
        self.block_tables[:rows, :width].copy_(meta.block_tables)
        if b > n:
            self.slot_mapping[n:b].fill_(-1)
            if meta.is_decode_only:
                self.seq_lens[n:b].fill_(0)
        graph.replay()
        return out[:n]
