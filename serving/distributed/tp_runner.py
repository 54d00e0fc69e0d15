"""The driver's model runner under tensor parallelism (rank 0, in the engine core's process).

Each step it builds the step inputs on the host, broadcasts them to the workers
(step_channel.py), runs its own shard of the forward (the layers' all-reduces meet the workers'),
computes the sampled rows' logits (an all-gather every rank joins) and samples them alone.
Async scheduling is not supported here: the workers would need the sampled ids on their devices.
"""

from __future__ import annotations

import torch

from serving.distributed.step_channel import DeviceStep, StepChannel
from serving.engine.prompt_logprobs import record_prompt_logprobs, wants_prompt_logprobs
from serving.engine.runner import ModelRunner, SampleResult
from serving.engine.step_inputs import build_step_inputs

HOST = torch.device("cpu")
_NO_TOKENS: list[int] = []


def run_step(runner: ModelRunner, step: DeviceStep) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One rank's share of a step: KV block copies, the forward, the sampled rows' logits.
    Every rank runs exactly this, in this order, so their collectives pair up."""
    for src, dst in step.copies:  # copy-on-write of shared partial blocks
        runner.kv_cache[:, :, dst] = runner.kv_cache[:, :, src]
    if runner.gpu is not None:
        hidden = runner.gpu.forward(step.input_ids, step.positions, step.meta)
    else:
        hidden = runner.model(step.input_ids, step.positions, runner.kv_caches, step.meta, runner.backend)
    logits = runner.model.compute_logits(hidden[step.logits_rows]) if step.num_samples else None
    return hidden, logits


class _BroadcastLogits:
    """The model as prompt logprobs see it: each extra logits call is announced to the workers,
    with the hidden rows, so they join its all-gather."""

    def __init__(self, model: torch.nn.Module, channel: StepChannel):
        self.model, self.channel = model, channel

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        self.channel.send_logits(hidden)
        return self.model.compute_logits(hidden)


class TensorParallelRunner(ModelRunner):
    def __init__(self, *args, channel: StepChannel, **kwargs):
        super().__init__(*args, **kwargs)
        self.channel = channel

    @torch.inference_mode()
    def execute(self, out, sample_targets) -> list[SampleResult]:
        from serving.sampler import sample

        inputs = build_step_inputs(out.scheduled, sample_targets, self.block_size, HOST)
        step = self.channel.send_step(inputs, out.blocks_to_copy)
        hidden, logits = run_step(self, step)
        # after the sampled rows' logits: the workers expect any extra logits calls after those
        if self.prompt_logprob_requests and wants_prompt_logprobs(out.scheduled):
            record_prompt_logprobs(_BroadcastLogits(self.model, self.channel), hidden, out.scheduled)
        if logits is None:
            return []
        seqs = inputs.sample_seqs
        params = [s.request.params for s in seqs]
        history = [
            s.output_token_ids if (p.frequency_penalty or p.presence_penalty) else _NO_TOKENS
            for s, p in zip(seqs, params, strict=True)
        ]
        result = sample(logits, params, [s.generator for s in seqs], history)
        token_ids, logprobs, entropies = (
            x.tolist() if isinstance(x, torch.Tensor) else list(x)
            for x in (result.token_ids, result.logprobs, result.entropies)
        )
        tops = result.top_logprobs if result.top_logprobs is not None else [None] * len(seqs)
        return [
            SampleResult(seq, t, lp, h, top)
            for seq, t, lp, h, top in zip(seqs, token_ids, logprobs, entropies, tops, strict=True)
        ]

    def launch(self, *args, **kwargs):
        raise RuntimeError("async scheduling is not supported with tensor parallelism (set it off)")
