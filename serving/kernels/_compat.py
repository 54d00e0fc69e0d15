"""Triton, or a stand-in that lets kernel modules import (and fail clearly when called) without it.

Kernel files must not use `from __future__ import annotations`: Triton reads the real
`tl.constexpr` annotations of a kernel's parameters.
"""

from __future__ import annotations

import importlib
from typing import Any

# typed Any whether Triton is installed or the stand-in serves: kernels are checked alike everywhere
try:  # pragma: no cover - exercised on the GPU machine
    triton: Any = importlib.import_module("triton")
    tl: Any = importlib.import_module("triton.language")

    HAS_TRITON = True
except ImportError:  # CPU-only install: kernels import but cannot run
    HAS_TRITON = False

    class _MissingKernel:
        def __init__(self, fn: Any):
            self.fn = fn

        def __getitem__(self, grid: Any) -> Any:
            raise RuntimeError(
                f"Triton kernel {self.fn.__name__} needs the `triton` package and a CUDA GPU"
            )

    class _TritonStub:
        @staticmethod
        def jit(fn: Any = None, **_: Any) -> Any:
            if fn is None:
                return _MissingKernel
            return _MissingKernel(fn)

        @staticmethod
        def cdiv(a: int, b: int) -> int:
            return -(-a // b)

        @staticmethod
        def next_power_of_2(n: int) -> int:
            return 1 if n <= 1 else 1 << (n - 1).bit_length()

    class _LanguageStub:
        constexpr = Any  # annotation only; never evaluated as a type

    triton = _TritonStub()
    tl = _LanguageStub()


# The attention kernels' arguments that change from step to step: the block table's width and the
# addresses of the per-sequence arrays (a mixed step passes them from a row offset).
RUNTIME_ARGS = ["block_tables_ptr", "seq_lens_ptr", "qsl_ptr", "bt_stride"]


def require_triton() -> None:
    if not HAS_TRITON:
        raise RuntimeError("the Triton kernels need the `triton` package and a CUDA GPU")


__all__ = ["HAS_TRITON", "RUNTIME_ARGS", "require_triton", "tl", "triton"]
