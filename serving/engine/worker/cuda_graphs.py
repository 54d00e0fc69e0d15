"""The GPU forward path: fused-kernel forward, with decode steps replayed from CUDA graphs.

Decode batches are padded up to a bucket (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, ...) and run
from a graph captured once per bucket, on first use. The step's tensors live in fixed buffers
the graphs read: each replay copies the step's ids, positions, slots, lengths and block tables
into them. Padded rows have seq_len 0 and slot -1, so they write nothing and read nothing.
The decode kernel's split count comes from `max_seq_len_hint`, fixed at capture.

A step with prompt rows in it (a lone prompt, a chunk of one, or a burst of new prompts joined by
decode rows) of up to 2,048 tokens is replayed from a prefill graph too: its tokens padded up to
a prefill bucket (16, 32, ..., 2048) with slot -1 and no sequence, its sequences padded up to the
graph's width (1 for a lone prompt, else `prefill_width`) with empty queries. Eagerly such a
step is ~330 kernel launches whose host time (~11-13 ms on an H200, against 1-3 ms of GPU work
for a short prompt) was the time to first token of a lone request and, step after step, of a
burst of them. Padded rows compute garbage that no real row reads (every kernel but attention is
row-wise, and attention reads only each sequence's rows). Decode rows may sit anywhere in such a
step, so the graph runs the split-K decode kernel over every sequence, with a length of 0 for
all but the one-token queries (`graph_decode_layout`, inside the graph), then the prefill kernel,
whose grid is flat over query tiles and needs no per-sequence length, skipping one-token
queries. The decode split count is fixed for the graph's width: a step whose decode rows reach
past `GRAPHED_DECODE_CONTEXT` tokens runs eagerly (its split count chosen for its own rows), as
does a step wider than the graph.

The runner hook: `GpuForward(model, kv_caches, backend, ...)`, then `.forward(ids, pos, meta)`
in place of `model(ids, pos, kv_caches, meta, backend)`.
"""

from __future__ import annotations

import gc
from typing import Any

import torch

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.engine.worker.causal_lm import as_causal_lm
from serving.engine.worker.graph_buckets import (
    DEFAULT_BUCKETS,
    PREFILL_BUCKETS,
    PREFILL_WIDTH,
    graph_decode_layout,
    prefill_bucket,
)
from serving.engine.worker.graph_logits import GraphedLogits, SampleStats, lm_head_weight
from serving.kernels.fused_forward import fused_forward


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
        graphed_logits: bool = False,
    ):
        self.model = as_causal_lm(model)
        self.module = model  # what the fused kernels walk
        self.kv_caches = kv_caches
        self.backend = backend
        self.use_fused = use_fused
        self.use_graphs = use_graphs
        self.buckets = tuple(b for b in buckets if b < max_batch) + (max_batch,)
        self.max_batch = max_batch
        self.max_seq_len_hint = max_seq_len_hint
        self.prefill_buckets = prefill_buckets
        self.prefill_width = min(PREFILL_WIDTH, max_batch)
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        # (token bucket, sequences): width 1 for a lone prompt, else prefill_width
        self.prefill_graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._pool: Any = None  # the graphs share one memory pool (a CUDA pool handle)
        # decode graphs that end with the lm_head and the sampler's statistics (graph_logits.py)
        self.logits = (
            GraphedLogits(lm_head_weight(model), max(self.buckets)) if graphed_logits else None
        )
        self._replayed: tuple[int, int] | None = None  # (decode bucket, rows) of the last forward
        if use_graphs:
            device = kv_caches[0][0].device
            i32: dict[str, Any] = {"dtype": torch.int32, "device": device}
            rows = max(max_batch, *prefill_buckets) if prefill_buckets else max_batch
            self.input_ids = torch.zeros(rows, dtype=torch.int64, device=device)
            self.positions = torch.zeros(rows, dtype=torch.int64, device=device)
            self.slot_mapping = torch.full((rows,), -1, dtype=torch.int64, device=device)
            self.seq_lens = torch.zeros(max_batch, **i32)
            self.block_tables = torch.zeros(max_batch, max_blocks_per_seq, **i32)
            self.query_start_loc = torch.arange(max_batch + 1, **i32)
            self.prefill_query_start_loc = torch.zeros(max_batch + 1, **i32)
            self.decode_seq_lens = torch.zeros(max_batch, **i32)  # graph_decode_layout's
            self.decode_rows = torch.zeros(max_batch, **i32)

    @classmethod
    def for_runner(cls, runner, max_batch: int = 512) -> GpuForward:
        """The engine's hook: sized from the runner's cache (block tables up to the model's
        context) and the model config (the split-count hint)."""
        num_blocks, block_size = runner.kv_cache.shape[2], runner.block_size
        max_len = min(runner.config.max_position_embeddings, num_blocks * block_size)
        # tensor parallel: no prefill graphs (no test on 2 GPUs covers collectives inside prefill
        # graphs yet)
        parallel = any(hasattr(m, "reduce") for m in runner.model.modules())
        return cls(
            runner.model,
            runner.kv_caches,
            runner.backend,
            max_batch=max_batch,
            max_blocks_per_seq=-(-max_len // block_size),
            max_seq_len_hint=max_len,
            prefill_buckets=() if parallel else PREFILL_BUCKETS,
            graphed_logits=not parallel and GraphedLogits.applies(runner.model),
        )

    def _eager(self, input_ids, positions, meta: AttentionMetadata) -> torch.Tensor:
        if self.use_fused:
            return fused_forward(
                self.module, input_ids, positions, self.kv_caches, meta, self.backend
            )
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

    def _prefill_meta(self, b: int, width: int) -> AttentionMetadata:
        """No host lengths and no decode count; wider than one sequence, the decode layout."""
        wide = width > 1  # a lone prompt's graph has no decode row
        return AttentionMetadata(
            query_start_loc=self.prefill_query_start_loc[: width + 1],
            seq_lens=self.seq_lens[:width],
            slot_mapping=self.slot_mapping[:b],
            block_tables=self.block_tables[:width],
            max_query_len=b,
            max_seq_len=self.max_seq_len_hint,
            decode_seq_lens=self.decode_seq_lens[:width] if wide else None,
            decode_rows=self.decode_rows[:width] if wide else None,
        )

    def _graphed_step(self, ids, pos, meta: AttentionMetadata) -> torch.Tensor:
        if meta.decode_seq_lens is not None and meta.decode_rows is not None:
            graph_decode_layout(
                meta.query_start_loc, meta.seq_lens, meta.decode_seq_lens, meta.decode_rows
            )
        return self._eager(ids, pos, meta)

    def _capture(self, b: int, width: int = 0) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """The decode graph of batch `b` (with the logits' tail when `self.logits`), or
        (width > 0) the prefill graph of `b` tokens."""
        meta = self._prefill_meta(b, width) if width else self._static_meta(b)
        ids, pos = self.input_ids[:b], self.positions[:b]
        tail = self.logits if not width else None
        self.seq_lens.fill_(0)  # warm-up and capture read and write nothing
        self.slot_mapping[:b].fill_(-1)
        self.prefill_query_start_loc.fill_(0)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # compile kernels, set up cuBLAS, outside the capture
            for _ in range(2):
                hidden = self._graphed_step(ids, pos, meta)
                if tail is not None:
                    tail.run(hidden, b)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = self._graphed_step(ids, pos, meta)
            if tail is not None:
                tail.run(out, b)
        self._pool = graph.pool()
        return graph, out

    def capture_up_to(self, batch: int) -> int:
        """Capture every decode bucket a batch of up to `batch` sequences uses, and the prefill
        graphs `batch` wide, now: at start-up, not in the first steps of each size, where the
        first requests of a fresh server would wait for the captures (and the one-token GEMV's
        configuration timing). Returns how many."""
        if not self.use_graphs:
            return 0
        width = max(1, min(batch, self.max_batch))
        if width != self.prefill_width:  # graphs of the old width would never replay again
            self.prefill_graphs = {key: g for key, g in self.prefill_graphs.items() if key[1] == 1}
            self.prefill_width = width
        top = self._bucket(min(batch, self.max_batch)) or self.max_batch  # the last bucket
        for b in self.buckets:
            if b > top:
                break
            if b not in self.graphs:
                self.graphs[b] = self._capture(b)
        for b in self.prefill_buckets:
            for w in sorted({1, self.prefill_width}):
                if (b, w) not in self.prefill_graphs:
                    self.prefill_graphs[b, w] = self._capture(b, w)
        return len(self.graphs) + len(self.prefill_graphs)

    def release_graphs(self) -> None:
        """Free the captured graphs and their pool. Must precede leaving an NCCL group: a
        communicator whose collectives live in a graph cannot finalize or abort until the graph
        is gone."""
        torch.cuda.synchronize()
        self.graphs.clear()
        self.prefill_graphs.clear()
        if self.logits is not None:
            self.logits.clear()
        self._replayed = None
        self._pool = None
        gc.collect()
        torch.cuda.synchronize()

    @torch.inference_mode()
    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata
    ) -> torch.Tensor:
        n = input_ids.shape[0]
        self._replayed = None
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
            b = prefill_bucket(meta, n, self.prefill_buckets, self.prefill_width)
            if b is None:
                return self._eager(input_ids, positions, meta)
            rows = meta.num_seqs
            width = 1 if rows == 1 else self.prefill_width
            if (b, width) not in self.prefill_graphs:
                self.prefill_graphs[b, width] = self._capture(b, width)
            graph, out = self.prefill_graphs[b, width]
            self.prefill_query_start_loc[: rows + 1].copy_(meta.query_start_loc)
            if width > rows:  # the padding sequences: empty queries after the last row, no context
                self.prefill_query_start_loc[rows + 1 : width + 1].fill_(n)
                self.seq_lens[rows:width].fill_(0)
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
        if meta.is_decode_only:
            self._replayed = (b, n)
        return out[:n]

    def sampled_rows(self, n: int) -> tuple[torch.Tensor, SampleStats] | None:
        """When the last forward replayed a decode graph with the logits' tail over `n` rows:
        those rows' bf16 logits and sampler statistics, valid until the next replay; else None."""
        if self.logits is None or self._replayed is None or self._replayed[1] != n:
            return None
        return self.logits.rows(self._replayed[0], n)
