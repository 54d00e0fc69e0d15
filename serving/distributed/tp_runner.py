"""The driver's model runner under tensor parallelism (rank 0, in the engine core's process).

Each step it builds the step inputs on the host, broadcasts them to the workers in one message
(step_channel.py), runs its own shard of the forward (the layers' all-reduces meet the workers'),
computes the sampled rows' logits (an all-gather every rank joins) and samples them alone, on the
device. `launch` queues all of it and returns an `InflightStep` without waiting (async
scheduling): the sampled ids are then broadcast over the device group, so each worker holds them
on its device for the next step's pending input rows. `execute` is launch, then wait, and skips
that broadcast (a synchronous step has no pending rows).
"""

from __future__ import annotations

from typing import Any

import torch

from serving.distributed.step_channel import DeviceStep, StepChannel
from serving.engine.core.request import Sequence
from serving.engine.core.scheduler import SchedulerOutput
from serving.engine.worker.input_batch import InputBatch
from serving.engine.worker.prompt_logprobs import record_prompt_logprobs, wants_prompt_logprobs
from serving.engine.worker.runner import (
    InflightStep,
    ModelRunner,
    SampleResult,
    sample_rows,
    take_pending,
)
from serving.engine.worker.step_runner import LaunchedStep

HOST = torch.device("cpu")


def run_step(
    runner: ModelRunner, step: DeviceStep, prev_ids: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One rank's share of a step: KV block copies, the forward, the sampled rows' logits.
    Every rank runs exactly this, in this order, so their collectives pair up. `prev_ids`: the
    previous step's sampled ids on this rank's device (read only when the step has pending rows)."""
    for src, dst in step.copies:  # copy-on-write of shared partial blocks
        runner.kv_cache[:, :, dst] = runner.kv_cache[:, :, src]
    input_ids = step.input_ids
    if step.pending_rows:
        input_ids = take_pending(
            input_ids,
            step.pending_rows,
            step.pending_src,
            prev_ids,
            step.pending_rows_dev,
            step.pending_src_dev,
        )
    if runner.gpu is not None:
        hidden = runner.gpu.forward(input_ids, step.positions, step.meta)
    else:
        hidden = runner.model(
            input_ids, step.positions, runner.kv_caches, step.meta, runner.backend
        )
    model: Any = runner.model  # a Llama-shaped model (serving/model), its compute_logits by name
    logits = model.compute_logits(hidden[step.logits_rows]) if step.num_samples else None
    return hidden, logits


class _BroadcastLogits:
    """The model as prompt logprobs see it: each extra logits call is announced to the workers,
    with the hidden rows, so they join its all-gather."""

    def __init__(self, model: Any, channel: StepChannel):
        self.model, self.channel = model, channel

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        self.channel.send_logits(hidden)
        logits: torch.Tensor = self.model.compute_logits(hidden)
        return logits


class TensorParallelRunner(ModelRunner):
    def __init__(self, *args: Any, channel: StepChannel, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.channel = channel
        self.host_batch = InputBatch(self.block_size, HOST)  # the step message is built on the host

    def execute(
        self, out: SchedulerOutput, sample_targets: list[list[Sequence]]
    ) -> list[SampleResult]:
        return self.launch(out, sample_targets, share_samples=False).results()

    @torch.inference_mode()
    def launch(
        self,
        out: SchedulerOutput,
        sample_targets: list[list[Sequence]],
        previous: LaunchedStep | None = None,
        pending: dict[Sequence, int] | None = None,
        share_samples: bool = True,
    ) -> InflightStep:
        """Queue one step on every rank. Order, which the workers' loop mirrors: the step
        message, the forward, the sampled rows' logits, the samples' broadcast (when shared),
        then any prompt-logprob logits calls."""
        inputs = self.host_batch.build(out.scheduled, sample_targets, pending or None)
        step = self.channel.send_step(inputs, out.blocks_to_copy, share_samples)
        prev_ids = previous.token_ids if previous is not None else None
        hidden, logits = run_step(self, step, prev_ids)
        sampled = None
        if logits is not None:
            sampled = sample_rows(logits, inputs.sample_seqs)
            if share_samples:
                self.channel.share_samples(sampled.token_ids)
        if self.prompt_logprob_requests and wants_prompt_logprobs(out.scheduled):
            record_prompt_logprobs(
                _BroadcastLogits(self.model, self.channel), hidden, out.scheduled
            )
        return InflightStep(inputs.sample_seqs if sampled is not None else [], sampled, self.device)
