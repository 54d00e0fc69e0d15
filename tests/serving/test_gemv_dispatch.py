"""Without CUDA the projections take F.linear: neither the one-token GEMV nor the skinny GEMM
applies on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from serving.kernels.gemv import gemv_applies
from serving.kernels.linear import linear
from serving.kernels.skinny_gemm import skinny_applies


@pytest.mark.parametrize("rows", [1, 2, 64, 300])
def test_cpu_linear_is_f_linear_exactly(rows):
    g = torch.Generator().manual_seed(rows)
    w = torch.randn(2048, 1024, generator=g).to(torch.bfloat16)
    x = torch.randn(rows, 1024, generator=g).to(torch.bfloat16)
    b = torch.randn(2048, generator=g).to(torch.bfloat16)
    assert not gemv_applies(x, w)
    assert not skinny_applies(x, w)
    assert torch.equal(linear(x, w, b), F.linear(x, w, b))
