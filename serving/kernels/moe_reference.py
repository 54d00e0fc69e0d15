"""The experts of a mixture-of-experts layer in torch: the CPU path and the GPU kernel's oracle.

y[t] = sum_j w[t, j] * down_e(act(gate_up_e(x[t]))), e = ids[t, j]. The (token, slot) pairs are
sorted by expert and each expert's run goes through two matmuls (segmented GEMMs), in the order
HF transformers computes them: projection (+ bias), activation, down projection (+ bias), times
the routing weight, then the slots summed. The loop is over experts that received tokens, on the
host: fine on the CPU, which is where this runs in serving; the GPU runs the grouped Triton
kernel (serving/kernels/moe_gemm.py).

Weights: w13 [E, 2I, H] (gate rows, then up rows), w2 [E, H, I], optional biases b13 [E, 2I] and
b2 [E, H].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from serving.kernels.moe_activation import ExpertActivation, gated_activation


def experts_reference(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    act: ExpertActivation,
    b13: torch.Tensor | None = None,
    b2: torch.Tensor | None = None,
) -> torch.Tensor:
    """[T, H] -> [T, H]; topk_ids/topk_weights [T, k]."""
    tokens, top_k = topk_ids.shape
    hidden = w2.shape[1]
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w13.shape[0]).tolist()
    rows = x[order // top_k]
    out_sorted = torch.empty(flat.numel(), hidden, dtype=x.dtype, device=x.device)
    start = 0
    for expert, count in enumerate(counts):
        if not count:
            continue
        seg = slice(start, start + count)
        h = F.linear(rows[seg], w13[expert], None if b13 is None else b13[expert])
        out_sorted[seg] = F.linear(
            gated_activation(h, act), w2[expert], None if b2 is None else b2[expert]
        )
        start += count
    out = torch.empty_like(out_sorted)
    out[order] = out_sorted
    out = out * topk_weights.reshape(-1, 1).to(out.dtype)
    return out.view(tokens, top_k, hidden).sum(dim=1)
