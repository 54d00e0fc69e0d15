"""The model runner: owns the model and the paged KV cache; per step it performs the scheduler's
block copies, builds the step tensors, runs the model, computes logits only for the rows that need
a sample (never for non-final prefill chunks), and calls the sampler.

`launch` queues a step's device work and returns an `InflightStep` without reading anything back:
its sampled ids stay on the device (the next step may take its input ids from them) and are
copied to pinned host memory without blocking, an event marking the copy; `InflightStep.results`
waits for that event. `execute` is the synchronous step: launch, then wait."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from serving.attention import get_backend
from serving.attention.fault import register_layer_caches
from serving.attention.layer_spec import kv_groups, layer_slots
from serving.engine.core.request import Sequence
from serving.engine.core.sample_result import SampleResult
from serving.engine.core.scheduler import SchedulerOutput
from serving.engine.worker.causal_lm import as_causal_lm
from serving.engine.worker.input_batch import InputBatch
from serving.engine.worker.prompt_logprobs import record_prompt_logprobs, wants_prompt_logprobs
from serving.engine.worker.step_inputs import build_step_inputs
from serving.engine.worker.step_runner import LaunchedStep
from serving.engine.worker.token_sampler import (
    DeviceSample,
    host_lists,
    host_top_logprobs,
    sample_on_device,
)
from serving.model.llama import LlamaForCausalLM


def kv_bytes_per_block(config, block_size: int, dtype: torch.dtype) -> int:
    """K and V, every layer, one block of tokens (every group's block, for several groups)."""
    elem = torch.empty((), dtype=dtype).element_size()
    return sum(g.bytes_per_block(block_size, elem) for g in kv_groups(config.layers()))


_NO_TOKENS: list[int] = []  # shared, never mutated


def sample_rows(logits: torch.Tensor, seqs: list[Sequence], stats=None) -> DeviceSample:
    """Sample row i of `logits` for seqs[i], on the device (`stats`: the rows' logit statistics,
    when a decode graph computed them)."""
    params = [s.request.params for s in seqs]
    # penalties need a row's generated tokens; copy them only for rows that have penalties
    # (a zero-penalty row's counts are multiplied by 0: [] gives the same scores)
    history = [
        s.output_token_ids if (p.frequency_penalty or p.presence_penalty) else _NO_TOKENS
        for s, p in zip(seqs, params, strict=True)
    ]
    return sample_on_device(logits, params, [s.generator for s in seqs], history, stats)


class InflightStep:
    """One launched step's samples: device tensors, their host copy under way, and who gets them."""

    def __init__(self, seqs: list[Sequence], sampled: DeviceSample | None, device: torch.device):
        self.seqs = seqs
        self.token_ids = sampled.token_ids if sampled is not None else None  # next step's inputs
        self._sampled = sampled
        self._event = None
        if sampled is None:
            return
        packed = sampled.packed()
        tops: tuple[torch.Tensor, ...] = ()
        if sampled.top_values is not None and sampled.top_indices is not None:
            tops = (sampled.top_values, sampled.top_indices)
        if device.type == "cuda":
            self._host = _to_pinned(packed)
            self._host_tops = tuple(_to_pinned(t) for t in tops)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host, self._host_tops = packed, tops

    def results(self) -> list[SampleResult]:
        sampled = self._sampled
        if sampled is None:
            return []
        if self._event is not None:
            self._event.synchronize()  # only this step's copy, not the steps queued after it
        token_ids, logprobs, entropies = host_lists(self._host)
        values, indices = self._host_tops if self._host_tops else (None, None)
        wanted = host_top_logprobs(sampled.wanted, values, indices, len(self.seqs))
        tops: Iterable[list[tuple[int, float]] | None] = wanted or [None] * len(self.seqs)
        # the lists hold Python ints/floats already
        return [
            SampleResult(seq, t, lp, h, top)
            for seq, t, lp, h, top in zip(
                self.seqs, token_ids, logprobs, entropies, tops, strict=True
            )
        ]


def _to_pinned(t: torch.Tensor) -> torch.Tensor:
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t, non_blocking=True)
    return host


class ModelRunner:
    def __init__(
        self,
        model: torch.nn.Module,
        config,
        num_blocks: int,
        block_size: int,
        device: torch.device,
        kv_dtype: torch.dtype,
        enable_cuda_graphs: bool,
        group_blocks: list[int] | None = None,
    ):
        self.model = as_causal_lm(model)
        self.config = config
        self.block_size = block_size
        self.device = device
        self.backend = get_backend(device)
        self.input_batch = InputBatch(block_size, device)
        # ids of live requests asking for prompt logprobs (kept by the engine): an empty set
        # skips the per-step scan, which would otherwise cost ~0.3 us per scheduled sequence
        self.prompt_logprob_requests: set[str] = set()
        specs = config.layers()
        self.kv_groups = kv_groups(specs)
        counts = group_blocks or [num_blocks] * len(self.kv_groups)
        # one tensor per KV-cache group [layers, 2, blocks, block_size, kv_heads, head_dim];
        # zeros, not empty: padded rows a kernel may touch must not hold NaN garbage
        self.group_caches = [
            torch.zeros(
                (len(g.layers), 2, n, block_size, g.num_kv_heads, g.head_dim),
                dtype=kv_dtype,
                device=device,
            )
            for g, n in zip(self.kv_groups, counts, strict=True)
        ]
        self.kv_cache = self.group_caches[0]
        self.kv_caches = [
            (self.group_caches[g][j, 0], self.group_caches[g][j, 1])
            for g, j in layer_slots(specs, self.kv_groups)
        ]
        register_layer_caches(self.kv_caches)
        # on GPU: fused kernels, decode steps replayed from CUDA graphs (cuda_graphs.py), for
        # the Llama family with one KV-cache group; other models run their modules eagerly
        self.gpu = None
        fused = isinstance(model, LlamaForCausalLM) and len(self.kv_groups) == 1
        if fused and device.type == "cuda" and getattr(self.backend, "name", "") == "triton":
            from serving.engine.worker.cuda_graphs import GpuForward

            self.gpu = GpuForward.for_runner(self)
            self.gpu.use_graphs = self.gpu.use_graphs and enable_cuda_graphs

    def execute(
        self, out: SchedulerOutput, sample_targets: list[list[Sequence]]
    ) -> list[SampleResult]:
        """Run one step; `sample_targets[i]` lists the sequences that get a token sampled from
        scheduled[i]'s last row (several when a request forks into its n samples)."""
        return self.launch(out, sample_targets).results()

    @torch.inference_mode()
    def launch(
        self,
        out: SchedulerOutput,
        sample_targets: list[list[Sequence]],
        previous: LaunchedStep | None = None,
        pending: dict[Sequence, int] | None = None,
    ) -> InflightStep:
        """Queue one step on the device. `pending` maps a sequence whose newest id is not on the
        host yet to its index in `previous.token_ids`: its input row is read from there."""
        for copy in out.blocks_to_copy:  # copy-on-write of shared partial blocks
            g, src, dst = copy if len(copy) == 3 else (0, *copy)  # (group, src, dst) past one
            cache = self.group_caches[g]
            cache[:, :, dst] = cache[:, :, src]
        if len(self.kv_groups) == 1:
            inputs = self.input_batch.build(out.scheduled, sample_targets, pending or None)
        else:
            inputs = build_step_inputs(
                out.scheduled,
                sample_targets,
                self.block_size,
                self.device,
                pending or None,
                len(self.kv_groups),
            )
        input_ids = inputs.input_ids
        if inputs.pending_rows:
            input_ids = self._take_pending(
                input_ids, inputs.pending_rows, inputs.pending_src, previous
            )
        if self.gpu is not None:
            hidden = self.gpu.forward(input_ids, inputs.positions, inputs.meta)
        else:
            hidden = self.model(
                input_ids, inputs.positions, self.kv_caches, inputs.meta, self.backend
            )
        if self.prompt_logprob_requests and wants_prompt_logprobs(out.scheduled):
            record_prompt_logprobs(self.model, hidden, out.scheduled)
        if not inputs.sample_seqs:
            return InflightStep([], None, self.device)
        graphed = None
        if self.gpu is not None and inputs.samples_every_row:
            graphed = self.gpu.sampled_rows(len(inputs.sample_seqs))
        if graphed is not None:  # the decode graph ran the lm_head and the statistics
            logits, stats = graphed
        else:
            logits, stats = self.model.compute_logits(hidden[inputs.logits_rows]), None
        return InflightStep(
            inputs.sample_seqs, sample_rows(logits, inputs.sample_seqs, stats), self.device
        )

    def _take_pending(
        self,
        input_ids: torch.Tensor,
        rows: list[int],
        src: list[int],
        previous: LaunchedStep | None,
    ) -> torch.Tensor:
        return take_pending(
            input_ids, rows, src, previous.token_ids if previous is not None else None
        )


def take_pending(
    input_ids: torch.Tensor,
    rows: list[int],
    src: list[int],
    prev_ids: torch.Tensor | None,
    rows_dev: torch.Tensor | None = None,
    src_dev: torch.Tensor | None = None,
) -> torch.Tensor:
    """Input ids whose values at `rows` are the previous step's samples `prev_ids[src]`,
    gathered on the device (`rows_dev`/`src_dev`: the same indices already there)."""
    if prev_ids is None:
        raise RuntimeError("a pending input id without the step that samples it")
    n = input_ids.shape[0]
    # steady decode: every row continues the previous step's row of the same index
    if len(rows) == n == prev_ids.shape[0] and rows == src and rows == list(range(n)):
        return prev_ids
    dev = input_ids.device
    if rows_dev is None or src_dev is None:
        rows_dev = torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(dev, non_blocking=True)
        src_dev = torch.from_numpy(np.asarray(src, dtype=np.int64)).to(dev, non_blocking=True)
    return input_ids.index_copy(0, rows_dev, prev_ids.index_select(0, src_dev))
