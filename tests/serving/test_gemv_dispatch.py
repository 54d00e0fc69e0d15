"""Without CUDA the projections take F.linear: the one-token GEMV never applies on the CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from serving.kernels.gemv import gemv_applies, linear


def test_cpu_linear_is_f_linear_exactly():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(2048, 1024, generator=g).to(torch.bfloat16)
    x = torch.randn(1, 1024, generator=g).to(torch.bfloat16)
    b = torch.randn(2048, generator=g).to(torch.bfloat16)
    assert not gemv_applies(x, w)
    assert torch.equal(linear(x, w, b), F.linear(x, w, b))
