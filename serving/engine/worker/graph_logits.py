"""The lm_head and the sampler's row statistics inside a decode step's CUDA graph.

Eagerly, after the graph replays the model, a decode step still queues the gather of the rows to
sample, the lm_head GEMM, its float32 cast, the statistics' eight buffers and two Triton kernels
(serving/kernels/logit_stats.py): host time on every step, where a SmolLM2 step at 64 sequences
was bound by its host time (bench_profile_step --staggered). In the graph they cost none: the
graph computes bf16 logits for every padded row into one buffer shared by all decode graphs
(graphs replay one at a time; the largest bucket's rows by the vocabulary, in bf16: 50 MB for
SmolLM2's, 155 MB for Qwen3's), then the statistics; a step whose samples are its rows in order
(every decode step without a fork) takes the first rows of both.

The statistics read the bf16 logits and compute in float32, as they do on the eager path's
float32 copy of the same bf16 values; a sampler that needs the logits themselves (temperature,
penalties, top logprobs) casts its rows then.
"""

from __future__ import annotations

import torch

from serving.kernels import logit_stats

SampleStats = tuple[
    torch.Tensor, torch.Tensor, torch.Tensor
]  # lse, greedy ids, packed (logit_stats)


def lm_head_weight(model: torch.nn.Module) -> torch.Tensor:
    """The model's output projection (a property of the single-device model families)."""
    weight = getattr(model, "lm_head_weight", None)
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{type(model).__name__} has no lm_head_weight")
    return weight


class GraphedLogits:
    def __init__(self, lm_head_weight: torch.Tensor, max_rows: int):
        self.weight = lm_head_weight.detach()
        self.max_rows = max_rows
        self.logits: torch.Tensor | None = None  # [max_rows, vocab], allocated at the first capture
        self.stats: dict[int, SampleStats] = {}  # per decode bucket: its graph's outputs

    @staticmethod
    def applies(model: torch.nn.Module) -> bool:
        """Single-device models only: a tensor-parallel lm_head gathers across ranks."""
        return (
            getattr(model, "tp", None) is None
            and hasattr(model, "lm_head_weight")
            and logit_stats.HAS_TRITON
        )

    def run(self, hidden: torch.Tensor, bucket: int) -> SampleStats:
        """The graph's tail (during warm-up and capture): logits and statistics of `bucket` rows."""
        if self.logits is None:
            # a normal tensor even when the first capture runs in inference mode: start-up
            # captures (outside it) write into it too
            with torch.inference_mode(False):
                self.logits = torch.empty(
                    self.max_rows, self.weight.shape[0], dtype=hidden.dtype, device=hidden.device
                )
        rows = self.logits[:bucket]
        with torch.no_grad():  # start-up captures run in grad mode, and out= is not differentiable
            torch.mm(hidden, self.weight.t(), out=rows)
            stats = logit_stats.logit_stats(rows)
        self.stats[bucket] = stats
        return stats

    def rows(self, bucket: int, n: int) -> tuple[torch.Tensor, SampleStats] | None:
        """After `bucket`'s graph replayed a step of `n` rows: their logits and statistics."""
        stats = self.stats.get(bucket)
        if stats is None:
            return None
        assert self.logits is not None  # run() allocated it with the first statistics
        lse, ids, packed = stats
        return self.logits[:n], (lse[:n], ids[:n], packed[:, :n])

    def clear(self) -> None:
        self.stats.clear()
        self.logits = None
