"""Dequantize GGUF tensor data to float32 torch tensors (Q4_0, Q4_1, Q8_0, F16, BF16, F32).

Block layouts (ggml-common.h), 32 weights per block:
  Q8_0: d:f16, q[32]:i8            w = d * q
  Q4_0: d:f16, qs[16]:u8           w = d * (nibble - 8)
  Q4_1: d:f16, m:f16, qs[16]:u8    w = d * nibble + m
A byte's low nibbles are weights 0..15 of the block, its high nibbles weights 16..31.
Written in torch (vectorized over all blocks) because gguf.quants' numpy path is slower; the tests
check it against gguf.quants.dequantize.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q

QK = 32
SUPPORTED_TYPES = (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1)


class UnsupportedQuantError(ValueError):
    def __init__(self, qtype: Q):
        names = ", ".join(t.name for t in SUPPORTED_TYPES)
        super().__init__(f"unsupported quantization type {qtype.name} (supported: {names})")
        self.qtype = qtype


def _from_numpy(array: np.ndarray) -> torch.Tensor:
    with warnings.catch_warnings():  # GGUF data is a read-only mmap; we only read it, never write
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def _f16(blocks: torch.Tensor, start: int) -> torch.Tensor:
    # two little-endian bytes per f16 scale; contiguous() so view() may reinterpret them
    return blocks[:, start : start + 2].contiguous().view(torch.float16).to(torch.float32)


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    return torch.cat([qs & 0x0F, qs >> 4], dim=1).to(torch.float32)


def dequantize(data: np.ndarray, qtype: Q) -> torch.Tensor:
    """`data` as GGUFReader gives it (typed for float types; uint8 [..., row_bytes] for quants).
    Returns float32 with the logical shape (row-major, the HF orientation)."""
    qtype = Q(qtype)
    if qtype == Q.F32:
        return _from_numpy(np.ascontiguousarray(data, dtype=np.float32)).clone()
    if qtype == Q.F16:
        return _from_numpy(np.ascontiguousarray(data).view(np.float16)).to(torch.float32)
    if qtype == Q.BF16:
        bits = _from_numpy(np.ascontiguousarray(data).view(np.int16))
        return bits.view(torch.bfloat16).to(torch.float32)
    if qtype not in (Q.Q8_0, Q.Q4_0, Q.Q4_1):
        raise UnsupportedQuantError(qtype)
    block_bytes = {Q.Q8_0: 34, Q.Q4_0: 18, Q.Q4_1: 20}[qtype]
    raw = np.ascontiguousarray(data).view(np.uint8)
    if raw.shape[-1] % block_bytes:
        raise ValueError(f"{qtype.name} row of {raw.shape[-1]} bytes is not whole blocks")
    out_shape = (*raw.shape[:-1], raw.shape[-1] // block_bytes * QK)
    blocks = _from_numpy(raw.reshape(-1, block_bytes))
    d = _f16(blocks, 0)
    if qtype == Q.Q8_0:
        values = blocks[:, 2:].contiguous().view(torch.int8).to(torch.float32) * d
    elif qtype == Q.Q4_0:
        values = (_nibbles(blocks[:, 2:]) - 8.0) * d
    else:
        values = _nibbles(blocks[:, 4:]) * d + _f16(blocks, 2)
    return values.reshape(out_shape)
