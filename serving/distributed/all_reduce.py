"""The layers' all-reduce: NCCL (or gloo on CPU), or, for small CUDA messages, a one-shot
all-reduce over NVLink peer memory (torch symmetric memory).

A decode step's all-reduces are small (batch x hidden values) and NCCL's latency dominates them
(~10-20 us each, 72 a step for a 36-layer model). The one-shot kernel copies this rank's partial
sum into a symmetric buffer, waits for every peer at a barrier, reads all peers' buffers over
NVLink and sums them, then meets the peers at a second barrier (so a rank's next copy cannot
overwrite a buffer a slower peer still reads). Everything is one kernel on the current stream,
so it runs inside CUDA graphs. The buffer is allocated once; messages larger than it, or of
another dtype or layout, go to NCCL: a choice made from the shape alone, so every rank makes it.
Multicast (NVLS) variants are never used (group.py keeps multicast off).

`tp_allreduce`: "nccl", "symm_mem", or "auto" (symmetric memory on CUDA when every pair of GPUs
has peer access and the rendezvous succeeds on every rank; NCCL otherwise, with one log line).
"""

from __future__ import annotations

import logging
import warnings

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from serving.distributed.context import ParallelContext

log = logging.getLogger("vigil.tensor_parallel")
MAX_SYMM_WORLD = 8
# one-shot reads every peer's whole message: past ~0.5 MiB NCCL's ring does better on NVLink
DEFAULT_SYMM_MAX_BYTES = 512 * 1024


class SymmMemAllReduce:
    name = "symm_mem"

    def __init__(
        self, group: ProcessGroup, device: torch.device, dtype: torch.dtype, max_bytes: int
    ):
        import torch.distributed._symmetric_memory as symm_mem

        self.group = group
        self.dtype = dtype
        self.numel = max_bytes // torch.empty((), dtype=dtype).element_size()
        self.group_name = group.group_name
        self.buffer = symm_mem.empty(self.numel, dtype=dtype, device=device)
        try:
            self.handle = symm_mem.rendezvous(self.buffer, self.group_name)
        except RuntimeError:
            # torch releases before the automatic group registration need it done by hand
            enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
            if enable is None:
                raise
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                enable(self.group_name)
            self.handle = symm_mem.rendezvous(self.buffer, self.group_name)
        ops = torch.ops.symm_mem
        self._copy_out = getattr(ops, "one_shot_all_reduce_copy_out", None)
        self._out = ops.one_shot_all_reduce_out

    def fits(self, t: torch.Tensor) -> bool:
        n = t.numel()
        return (
            0 < n <= self.numel
            and t.dtype == self.dtype
            and t.is_contiguous()
            and (n * t.element_size()) % 16 == 0
        )

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        if not self.fits(t):
            dist.all_reduce(t, group=self.group)
            return t
        n = t.numel()
        staged = self.buffer[:n].view(t.shape)
        out = torch.empty_like(t)
        if self._copy_out is not None:  # the copy into the buffer inside the kernel
            self._copy_out(staged, t, "sum", self.group_name, out)
        else:
            staged.copy_(t)
            self._out(staged, "sum", self.group_name, out)
        return out


class GroupAllReduce:
    """dist.all_reduce on the device group: NCCL on CUDA, gloo on CPU."""

    def __init__(self, group: ProcessGroup) -> None:
        self.group = group
        self.name = dist.get_backend(group)

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(t, group=self.group)
        return t


def _symm_mem_usable(device: torch.device, world_size: int) -> str | None:
    """None when this rank can run the one-shot kernel; else the reason it cannot."""
    if device.type != "cuda":
        return "not on CUDA"
    if world_size > MAX_SYMM_WORLD:
        return f"world size {world_size} > {MAX_SYMM_WORLD}"
    try:
        import torch.distributed._symmetric_memory  # noqa: F401  # it loads, or the except says why

        torch.ops.symm_mem.one_shot_all_reduce_out  # noqa: B018  # the op is there, or AttributeError
    except (ImportError, AttributeError, RuntimeError) as exc:
        return f"torch has no symmetric-memory one-shot all-reduce ({exc})"
    me = device.index if device.index is not None else torch.cuda.current_device()
    for peer in range(world_size):
        if peer != me and not torch.cuda.can_device_access_peer(me, peer):
            return f"no peer access from GPU {me} to GPU {peer}"
    return None


def _all_agree(ok: bool, cpu_group: ProcessGroup) -> bool:
    flag = torch.tensor([1 if ok else 0], dtype=torch.int64)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=cpu_group)
    return bool(flag.item())


def make_all_reduce(
    mode: str, tp: ParallelContext, device: torch.device, dtype: torch.dtype, max_bytes: int
) -> SymmMemAllReduce | GroupAllReduce:
    """The all-reduce every rank uses (every rank calls this at the same point: it agrees with
    the others over the host group, so all ranks pick the same one)."""
    if mode not in ("auto", "nccl", "symm_mem"):
        raise ValueError(f"unknown tp_allreduce {mode!r} (expected 'auto', 'nccl' or 'symm_mem')")
    nccl = GroupAllReduce(tp.group)
    if mode == "nccl" or device.type != "cuda":
        if mode == "symm_mem":
            log.info("tp_allreduce: symm_mem needs CUDA; using %s", dist.get_backend(tp.group))
        return nccl
    reason = _symm_mem_usable(device, tp.world_size)
    if not _all_agree(reason is None, tp.cpu_group):
        log.info(
            "tp_allreduce: symmetric memory unavailable (%s); using NCCL",
            reason or "on another rank",
        )
        return nccl
    reducer, error = None, None
    try:
        reducer = SymmMemAllReduce(tp.group, device, dtype, max_bytes)
    except Exception as exc:  # noqa: BLE001 - any failure means: NCCL
        error = f"{type(exc).__name__}: {exc}"
    agreed = _all_agree(reducer is not None, tp.cpu_group)  # every rank joins, whatever it holds
    if reducer is None or not agreed:
        log.warning(
            "tp_allreduce: symmetric-memory rendezvous failed (%s); using NCCL",
            error or "on another rank",
        )
        return nccl
    return reducer


def with_all_reduce(
    tp: ParallelContext,
    mode: str,
    device: torch.device,
    dtype: torch.dtype,
    max_tokens: int,
    hidden_size: int,
) -> ParallelContext:
    """`tp` with the chosen all-reduce; the symmetric buffer holds up to `max_tokens` rows of
    `hidden_size` (a step's largest message), capped at DEFAULT_SYMM_MAX_BYTES."""
    from dataclasses import replace

    elem = torch.empty((), dtype=dtype).element_size()
    max_bytes = min(DEFAULT_SYMM_MAX_BYTES, max_tokens * hidden_size * elem)
    return replace(tp, reducer=make_all_reduce(mode, tp, device, dtype, max_bytes))
