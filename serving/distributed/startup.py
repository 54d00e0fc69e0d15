"""Starting a tensor-parallel engine from the driver: the worker processes, rank 0's shard, the
KV pool size every rank shares, the process group, and the driver's runner.

Order: workers are started first and load their shards while the driver loads its own; the driver
then sizes the KV pool (per rank: `kv_cache_memory_mb` of each device, over that rank's KV
heads; rank 0 holds the most), tells the workers, and all ranks join the group.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
from dataclasses import dataclass, replace

import torch

from serving.distributed.all_reduce import with_all_reduce
from serving.distributed.group import (
    DEFAULT_INIT_TIMEOUT_S,
    apply_nccl_env,
    destroy_group,
    free_port,
    init_group,
)
from serving.distributed.launcher import WorkerLaunch, WorkerProcesses
from serving.distributed.partition import check_partition, rank_config
from serving.distributed.source import ModelSource
from serving.distributed.step_channel import StepChannel
from serving.distributed.tp_runner import TensorParallelRunner
from serving.engine.config import EngineConfig
from serving.loader.load import LoadedModel
from serving.loader.shard import ShardSpec

log = logging.getLogger("vigil.tensor_parallel")
LOAD_TIMEOUT_S = 900.0  # a worker reading a large checkpoint from a slow disk


@dataclass
class TensorParallel:
    loaded: LoadedModel  # rank 0's, weights dropped (config and tokenizer stay)
    num_blocks: int
    runner: TensorParallelRunner
    workers: WorkerProcesses
    all_reduce_name: str = "default"  # the layers' all-reduce: "nccl", "symm_mem" (CUDA) or gloo's
    closed: bool = False

    def close(self) -> None:
        """Stop the workers (STOP, then a bounded join, then kill) and leave the group."""
        if self.closed:
            return
        self.closed = True
        if self.workers.alive():
            with contextlib.suppress(Exception):  # a worker already gone breaks the broadcast
                self.runner.channel.send_stop()
        self.runner.channel.close()
        gpu = getattr(self.runner, "gpu", None)
        if gpu is not None:
            gpu.release_graphs()  # graphs that hold NCCL collectives block leaving
        destroy_group()  # every rank leaves at once, then the join
        self.workers.join()


def _source(cfg: EngineConfig, loaded: LoadedModel | ModelSource | None) -> ModelSource:
    if isinstance(loaded, ModelSource):
        return loaded
    if loaded is not None:
        return ModelSource(loaded=loaded)
    return ModelSource(path=cfg.model_path)


def _driver_device(device: torch.device, world_size: int) -> torch.device:
    if device.type != "cuda":
        return device
    count = torch.cuda.device_count()
    if count < world_size:
        raise ValueError(
            f"tensor parallel size {world_size} needs {world_size} CUDA devices; {count} visible"
        )
    torch.cuda.set_device(0)
    return torch.device("cuda", 0)


def start_tensor_parallel(
    cfg: EngineConfig,
    loaded: LoadedModel | ModelSource | None,
    device: torch.device,
    dtype: torch.dtype,
    kv_dtype: torch.dtype,
    init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S,
) -> TensorParallel:
    """`loaded`: None (read `cfg.model_path`), a full LoadedModel, or a ModelSource."""
    from serving.engine.worker.runner import kv_bytes_per_block
    from serving.model import build_model

    world_size = cfg.tensor_parallel_size
    apply_nccl_env()
    device = _driver_device(device, world_size)
    source = _source(cfg, loaded)
    if source.loaded is not None:
        check_partition(source.loaded.config, world_size)  # before any process starts
    port = free_port()
    launches = [
        WorkerLaunch(rank, world_size, port, cfg, source, init_timeout_s, os.getpid())
        for rank in range(1, world_size)
    ]
    workers = WorkerProcesses(launches)
    try:
        mine = source.load_shard(ShardSpec(0, world_size), device, dtype)
        check_partition(mine.config, world_size)
        workers.wait_all("loaded", LOAD_TIMEOUT_S)
        local = rank_config(mine.config, world_size, 0)
        num_blocks = cfg.num_kv_blocks or (
            cfg.kv_cache_memory_mb * 2**20 // kv_bytes_per_block(local, cfg.block_size, kv_dtype)
        )
        workers.send_all(num_blocks)
        tp = init_group(0, world_size, port, device, init_timeout_s)
        tp = with_all_reduce(
            tp, cfg.tp_allreduce, device, dtype, cfg.max_num_batched_tokens, mine.config.hidden_size
        )
        model = build_model(mine.config, mine.state_dict, device, dtype, tp=tp)
        runner = TensorParallelRunner(
            model,
            local,
            num_blocks,
            cfg.block_size,
            device,
            kv_dtype,
            cfg.enable_cuda_graphs,
            channel=StepChannel(tp, device),
        )
        workers.wait_all("ready", init_timeout_s)
    except BaseException:
        workers.kill()
        destroy_group()
        raise
    log.info(
        "tensor parallel: %d ranks on %s, %d KV blocks per rank, %s all-reduce",
        world_size,
        device.type,
        num_blocks,
        tp.all_reduce_name,
    )
    group = TensorParallel(
        replace(mine, state_dict={}), num_blocks, runner, workers, tp.all_reduce_name
    )
    atexit.register(group.close)
    return group
