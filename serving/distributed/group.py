"""Process-group set-up for one tensor-parallel group on this host.

The device group runs the layers' collectives (NCCL on CUDA, gloo on CPU); a second gloo group
carries the host-side step broadcast, so workers wait for the next step without a GPU kernel.
NVLink SHARP (NVLS) and symmetric-memory multicast stay off in every rank's process.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import threading

import torch
import torch.distributed as dist

from serving.distributed.context import ParallelContext

# set in every process of the group before CUDA or NCCL start
NCCL_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DEFAULT_INIT_TIMEOUT_S = 120.0
# workers wait on the host group for the next step however long the engine idles; a dead driver
# is noticed by the workers' parent watch instead (worker.py)
IDLE_TIMEOUT = datetime.timedelta(days=30)


def apply_nccl_env() -> None:
    os.environ.update(NCCL_ENV)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def init_group(
    rank: int,
    world_size: int,
    port: int,
    device: torch.device,
    timeout_s: float = DEFAULT_INIT_TIMEOUT_S,
) -> ParallelContext:
    """Join the group as `rank` (blocks until every rank joined, at most `timeout_s`)."""
    apply_nccl_env()
    if dist.is_initialized():
        raise RuntimeError(
            "a torch.distributed process group is already initialised in this process"
        )
    timeout = datetime.timedelta(seconds=timeout_s)
    backend = backend_for(device)
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,
    )
    cpu_group = dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT)
    return ParallelContext(
        rank=rank, world_size=world_size, group=dist.group.WORLD, cpu_group=cpu_group
    )


LEAVE_TIMEOUT_S = 30.0
log = logging.getLogger("vigil.tensor_parallel")


def destroy_group(timeout_s: float = LEAVE_TIMEOUT_S) -> bool:
    """Leave the process group; False when that did not finish within `timeout_s`.

    gloo groups are destroyed. NCCL groups are aborted instead: destroying a communicator
    finalizes it, which waits on the peer ranks and can hang at shutdown while a peer is gone, while
    an abort
    is local to this rank. Either runs in a daemon thread, so a stuck communicator cannot keep a
    process from exiting.
    """
    if not dist.is_initialized():
        return True
    nccl = dist.get_backend() == "nccl"
    if nccl:
        torch.cuda.synchronize()  # nothing of ours is still in flight on the communicator
    leave = dist.distributed_c10d._abort_process_group if nccl else dist.destroy_process_group
    done = threading.Thread(target=leave, name="leave-process-group", daemon=True)
    done.start()
    done.join(timeout_s)
    if done.is_alive():
        log.warning(
            "leaving the %s process group did not finish in %.0f s", dist.get_backend(), timeout_s
        )
        return False
    return True
