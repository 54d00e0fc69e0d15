"""Programmatic dependent launch (PDL) for the Triton kernels of a decode step (Hopper and newer).

At batch 1 a decode step is a chain of about eight kernels per layer, each a few microseconds
long: the next one normally starts only after the previous one has finished and its blocks have
left the GPU. Launched with PDL, a kernel may start while the kernel before it in the stream still
runs; `launch_next` lets the following kernel start early, and `wait_for_prior` blocks until every
earlier kernel has finished and its writes are visible. A GEMV reads its first weight chunk before
waiting (weights are written at load time, never by a step's kernels), so its weight stream
overlaps the norm or attention kernel before it instead of starting after it.

The rule that keeps this safe: every kernel launched with `launch_pdl` calls `wait_for_prior`
unconditionally, in every program, before it reads anything an earlier kernel wrote and before
its first store. A kernel that finished without waiting could let its successor's wait return
while the kernel before it still runs. Kernels launched without the flag keep the stream's
ordinary full ordering, so a PDL kernel may sit next to any cuBLAS, NCCL or torch kernel.

Kernel files must not use `from __future__ import annotations` (see _compat.py).
"""

import torch

from serving.kernels._compat import HAS_TRITON, tl, triton

# "auto": on for CUDA devices of compute capability 9.0 and newer; "off": every kernel waits for
# the previous one as usual. Set by the engine from the `programmatic_launch` setting; graphs
# captured before a change keep the old launches.
MODE = "auto"
MODES = ("auto", "off")

_supported: dict[int, bool] = {}

if HAS_TRITON:  # pragma: no cover - GPU machine
    try:
        from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

        _HAS_GDC = True
    except ImportError:  # an older Triton: kernels run without overlap
        _HAS_GDC = False
else:
    _HAS_GDC = False


def set_mode(mode: str) -> None:
    global MODE
    if mode not in MODES:
        raise ValueError(
            f"unknown programmatic_launch {mode!r} (expected one of {', '.join(MODES)})"
        )
    MODE = mode


def enabled(device: torch.device) -> bool:
    """Whether kernels on `device` are launched with PDL now (the `USE_PDL` constexpr and the
    `launch_pdl` launch option of the decode-path kernels)."""
    if MODE == "off" or device.type != "cuda" or not _HAS_GDC:
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    known = _supported.get(index)
    if known is None:
        known = _supported[index] = torch.cuda.get_device_capability(index)[0] >= 9
    return known


if _HAS_GDC:  # pragma: no cover - GPU machine

    @triton.jit
    def wait_for_prior(USE_PDL: tl.constexpr):  # type: ignore[no-untyped-def]  # Triton kernel
        """Block until the kernels before this one have finished and their writes are visible."""
        if USE_PDL:
            gdc_wait()

    @triton.jit
    def launch_next(USE_PDL: tl.constexpr):  # type: ignore[no-untyped-def]  # Triton kernel
        """Let the next kernel in the stream start once every program of this one got here."""
        if USE_PDL:
            gdc_launch_dependents()

else:

    @triton.jit
    def wait_for_prior(USE_PDL: tl.constexpr):  # type: ignore[no-untyped-def]  # Triton kernel
        pass

    @triton.jit
    def launch_next(USE_PDL: tl.constexpr):  # type: ignore[no-untyped-def]  # Triton kernel
        pass
