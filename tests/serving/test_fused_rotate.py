"""The fused forward's rotary step: head sizes the Triton kernel does not take rotate in torch,
equal to the model's own rotate-half formula."""

import pytest
import torch

from serving.kernels.fused_forward import rotate
from serving.model.rope import apply_rope


@pytest.mark.parametrize("head_dim", [8, 16, 24, 48])
def test_small_and_odd_head_sizes_rotate_like_the_model(head_dim):
    g = torch.Generator().manual_seed(head_dim)
    x = torch.randn(5, 3, head_dim, generator=g)
    angles = torch.randn(5, head_dim // 2, generator=g)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    want = apply_rope(x, cos, sin)
    rotate(x, cos, sin)
    torch.testing.assert_close(x, want)
