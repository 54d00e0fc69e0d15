"""A mixture-of-experts layer: the router picks k experts per token and weighs them, the experts
(gated MLPs, their weights stacked [E, ...]) run as grouped GEMMs over the tokens sorted by
expert, and each token's k outputs are summed with their weights.

On CUDA the experts are the Triton grouped GEMM (serving/kernels/moe_gemm.py: two launches, no
loop over experts); elsewhere the torch reference (serving/kernels/moe_reference.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from serving.kernels._compat import HAS_TRITON
from serving.kernels.moe_activation import ExpertActivation
from serving.kernels.moe_reference import experts_reference
from serving.loader.moe_config import SOFTMAX_TOPK, TOPK_SOFTMAX, MoEConfig
from serving.model.moe_fault import faulted_ids


class TopKRouter(nn.Module):
    def __init__(self, hidden_size: int, moe: MoEConfig):
        super().__init__()
        self.kind, self.top_k, self.renormalize = moe.router, moe.top_k, moe.renormalize
        if self.kind not in (SOFTMAX_TOPK, TOPK_SOFTMAX):
            raise ValueError(f"unknown router {self.kind!r}")
        self.weight = nn.Parameter(torch.empty(moe.num_experts, hidden_size))
        self.bias = nn.Parameter(torch.empty(moe.num_experts)) if moe.router_bias else None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Routing weights [T, k] in x's dtype and expert ids [T, k] (int64), best first."""
        logits = F.linear(x, self.weight, self.bias)
        if self.kind == SOFTMAX_TOPK:
            probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            weights, ids = torch.topk(probs, self.top_k, dim=-1)
            if self.renormalize:
                weights = weights / weights.sum(dim=-1, keepdim=True)
            return weights.to(x.dtype), ids
        top, ids = torch.topk(logits, self.top_k, dim=-1)
        return torch.softmax(top, dim=-1, dtype=top.dtype), ids


class SparseMoeBlock(nn.Module):
    """Stands where a layer's dense MLP stands: [T, H] -> [T, H]."""

    def __init__(self, hidden_size: int, moe: MoEConfig, layer_index: int):
        super().__init__()
        e, i = moe.num_experts, moe.intermediate_size
        self.layer_index = layer_index
        self.num_experts = e
        self.router = TopKRouter(hidden_size, moe)
        self.w13 = nn.Parameter(torch.empty(e, 2 * i, hidden_size))  # gate rows, then up rows
        self.w2 = nn.Parameter(torch.empty(e, hidden_size, i))
        self.b13 = nn.Parameter(torch.empty(e, 2 * i)) if moe.expert_bias else None
        self.b2 = nn.Parameter(torch.empty(e, hidden_size)) if moe.expert_bias else None
        self.activation = ExpertActivation(moe.activation, moe.swiglu_alpha, moe.swiglu_limit)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, ids = self.router(x)
        ids = faulted_ids(ids, self.layer_index, self.num_experts)
        experts = fused_experts_for(x)
        return experts(x, self.w13, self.w2, ids, weights, self.activation, self.b13, self.b2)


def fused_experts_for(x: torch.Tensor) -> Callable[..., torch.Tensor]:
    """The experts' implementation for x's device: the Triton grouped GEMM on CUDA, else the
    torch reference."""
    if x.is_cuda and HAS_TRITON:
        from serving.kernels.moe_gemm import fused_experts

        return fused_experts
    return experts_reference
