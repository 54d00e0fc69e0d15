"""How many API server processes `vigil serve` starts when `VIGIL_API_SERVER_COUNT` is `auto`
(the default): enough that the API side streams what the engine can produce, no more than the
host's CPUs allow beside the engine core.

One API process (tokenization, SSE, detokenization under one GIL) streams about 40k tokens/s
before it sits at 100 % of a core (SmolLM2-135M, 64 streams, H200 host: bench/results/serving.md);
a small model's engine produces up to ~1k tokens/s per stream and aims at 100k tokens/s at 256
streams, while a CPU engine produces far less than one process streams. So on a GPU the count
is ceil(min(max_num_seqs x 1k, 100k) / 40k) — 2 at the default 64 sequences, 3 at 256 — capped
at the CPUs this process may run on less two (the engine core's loop and everything else), and
1 on the CPU, with the engine in-process, or where the host has four CPUs or fewer.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vigil.config import Settings

PER_PROCESS_TOK_S = 40_000  # what one API process streams at 100 % of a core
STREAM_TOK_S = 1_000  # a small model's decode rate per stream on one GPU
ENGINE_PEAK_TOK_S = 100_000  # a small model's engine at 256 streams
RESERVED_CPUS = 2  # the engine core's loop; the OS, the sidecar and the database


def auto_api_server_count(cpus: int, on_gpu: bool, max_num_seqs: int) -> int:
    if not on_gpu:
        return 1
    demand = min(max_num_seqs * STREAM_TOK_S, ENGINE_PEAK_TOK_S)
    wanted = math.ceil(demand / PER_PROCESS_TOK_S)
    return max(1, min(wanted, cpus - RESERVED_CPUS))


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity masks on this platform
        return os.cpu_count() or 1


def _on_gpu(device: str) -> bool:
    if device != "auto":
        return device == "cuda"
    import torch  # the API processes are spawned, so the parent may touch the driver

    return torch.cuda.is_available()


def resolve_api_server_count(settings: Settings) -> int:
    """`settings.api_server_count` as a number: itself when set, else the automatic choice."""
    value = settings.api_server_count
    if value != "auto":
        return int(value)
    if settings.engine_process != "separate":
        return 1
    return auto_api_server_count(usable_cpus(), _on_gpu(settings.device), settings.max_num_seqs)
