"""`StepRunner`: what the engine asks of whatever runs its steps on the model.

`ModelRunner` (runner.py) runs them in this process; the tensor-parallel runner of
serving/distributed broadcasts each step to its shard processes first. The engine sees only
this surface, so it never learns which one it drives.
"""

from __future__ import annotations

from typing import Protocol

import torch

from serving.engine.core.request import Sequence
from serving.engine.core.sample_result import SampleResult
from serving.engine.core.scheduler import SchedulerOutput


class LaunchedStep(Protocol):
    """A step queued on the device whose samples are not read back yet."""

    @property
    def seqs(self) -> list[Sequence]: ...

    @property
    def token_ids(self) -> torch.Tensor | None:
        """The sampled ids, on the device (the next step's inputs may be read from them)."""
        ...

    def results(self) -> list[SampleResult]:
        """Wait for the step's samples (one per entry of `seqs`)."""
        ...


class StepRunner(Protocol):
    # ids of live requests that asked for prompt logprobs (the engine keeps it)
    prompt_logprob_requests: set[str]

    def execute(
        self, out: SchedulerOutput, sample_targets: list[list[Sequence]]
    ) -> list[SampleResult]:
        """Run one step and wait for its samples."""
        ...

    def launch(
        self,
        out: SchedulerOutput,
        sample_targets: list[list[Sequence]],
        previous: LaunchedStep | None = None,
        pending: dict[Sequence, int] | None = None,
    ) -> LaunchedStep:
        """Queue one step; `pending`: sequences whose newest id is `previous`'s sample."""
        ...
