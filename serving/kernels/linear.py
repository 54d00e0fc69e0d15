"""The projection every model layer calls: F.linear, or a Triton kernel where one is faster.

One row (a batch-1 decode step) goes to the GEMV (serving/kernels/gemv.py), a few dozen rows
(a batched decode step) to the skinny GEMM (serving/kernels/skinny_gemm.py, which keeps cuBLAS
for a shape where cuBLAS times faster), anything else to cuBLAS.
"""

from __future__ import annotations

import torch

from serving.kernels import gemv, skinny_gemm


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear, through `gemv` or `skinny_linear` where they apply."""
    if gemv.ENABLED and gemv.gemv_applies(x, weight):
        return gemv.gemv(x, weight, bias)
    if skinny_gemm.skinny_applies(x, weight):
        return skinny_gemm.skinny_linear(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)
