"""The model runner: owns the model and the paged KV cache; per step it performs the scheduler's
block copies, builds the step tensors, runs the model, computes logits only for the rows that need
a sample (never for non-final prefill chunks), and calls the sampler."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from serving.attention import get_backend
from serving.engine.prompt_logprobs import record_prompt_logprobs, wants_prompt_logprobs
from serving.engine.request import Sequence
from serving.engine.scheduler import SchedulerOutput
from serving.engine.step_inputs import build_step_inputs


@dataclass(slots=True)
class SampleResult:
    seq: Sequence
    token_id: int
    logprob: float
    entropy: float
    top_logprobs: list[tuple[int, float]] | None


def kv_bytes_per_block(config, block_size: int, dtype: torch.dtype) -> int:
    """K and V, every layer, one block of tokens."""
    elem = torch.empty((), dtype=dtype).element_size()
    return 2 * config.num_hidden_layers * block_size * config.num_key_value_heads * config.head_dim * elem


_NO_TOKENS: list[int] = []  # shared, never mutated


def _as_list(x) -> list:
    return x.tolist() if isinstance(x, torch.Tensor) else list(x)


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
    ):
        self.model = model
        self.config = config
        self.block_size = block_size
        self.device = device
        self.backend = get_backend(device)
        # ids of live requests asking for prompt logprobs (kept by the engine): an empty set
        # skips the per-step scan, which would otherwise cost ~0.3 us per scheduled sequence
        self.prompt_logprob_requests: set[str] = set()
        shape = (config.num_hidden_layers, 2, num_blocks, block_size, config.num_key_value_heads, config.head_dim)
        # zeros, not empty: padded rows a kernel may touch must not hold NaN garbage
        self.kv_cache = torch.zeros(shape, dtype=kv_dtype, device=device)
        self.kv_caches = [(self.kv_cache[i, 0], self.kv_cache[i, 1]) for i in range(shape[0])]
        # on GPU: fused kernels, decode steps replayed from CUDA graphs (serving/cuda_graphs.py)
        self.gpu = None
        if device.type == "cuda" and getattr(self.backend, "name", "") == "triton":
            from serving.cuda_graphs import GpuForward

            self.gpu = GpuForward.for_runner(self)
            self.gpu.use_graphs = self.gpu.use_graphs and enable_cuda_graphs

    @torch.inference_mode()
    def execute(self, out: SchedulerOutput, sample_targets: list[list[Sequence]]) -> list[SampleResult]:
        """Run one step; `sample_targets[i]` lists the sequences that get a token sampled from
        scheduled[i]'s last row (several when a request forks into its n samples)."""
        from serving.sampler import sample  # the sampler module (owned by the sampling side)

        for src, dst in out.blocks_to_copy:  # copy-on-write of shared partial blocks
            self.kv_cache[:, :, dst] = self.kv_cache[:, :, src]
        inputs = build_step_inputs(out.scheduled, sample_targets, self.block_size, self.device)
        if self.gpu is not None:
            hidden = self.gpu.forward(inputs.input_ids, inputs.positions, inputs.meta)
        else:
            hidden = self.model(inputs.input_ids, inputs.positions, self.kv_caches, inputs.meta, self.backend)
        if self.prompt_logprob_requests and wants_prompt_logprobs(out.scheduled):
            record_prompt_logprobs(self.model, hidden, out.scheduled)
        if not inputs.sample_seqs:
            return []
        logits = self.model.compute_logits(hidden[inputs.logits_rows])
        seqs = inputs.sample_seqs
        params = [s.request.params for s in seqs]
        # penalties need a row's generated tokens; copy them only for rows that have penalties
        # (a zero-penalty row's counts are multiplied by 0: [] gives the same scores)
        history = [
            s.output_token_ids if (p.frequency_penalty or p.presence_penalty) else _NO_TOKENS
            for s, p in zip(seqs, params, strict=True)
        ]
        result = sample(logits, params, [s.generator for s in seqs], history)
        token_ids = _as_list(result.token_ids)
        logprobs = _as_list(result.logprobs)
        entropies = _as_list(result.entropies)
        tops = result.top_logprobs if result.top_logprobs is not None else [None] * len(seqs)
        # the sampler's lists hold Python ints/floats already (tensors: tolist() gives them)
        return [
            SampleResult(seq, t, lp, h, top)
            for seq, t, lp, h, top in zip(seqs, token_ids, logprobs, entropies, tops, strict=True)
        ]
