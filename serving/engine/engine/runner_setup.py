"""What the engine runs on: the model loaded (or its tensor-parallel shards started), the KV pool
sized, and the runner that owns both. The engine builds its block manager and scheduler over the
pool this reports.

It sits above the worker and serving/distributed, so the choice between an in-process runner and
tensor-parallel shards is made here and neither of those imports the other's chooser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

from serving.attention.layer_spec import KVGroup, kv_groups
from serving.engine.config import EngineConfig
from serving.engine.worker.kv_pool import check_pool, max_len_of_pool, plan_group_blocks
from serving.engine.worker.runner import ModelRunner
from serving.engine.worker.step_runner import StepRunner
from serving.kernels import pdl
from serving.model import build_model

if TYPE_CHECKING:
    from typing import TypeAlias

    from serving.distributed.source import ModelSource
    from serving.distributed.startup import TensorParallel
    from serving.loader import LoadedModel

    # what an engine may be handed instead of reading `model_path`: a model loaded already, or,
    # with tensor parallel, where each shard process reads its own part
    ModelInput: TypeAlias = LoadedModel | ModelSource


@dataclass
class RunnerSetup:
    loaded: LoadedModel  # config and tokenizer (rank 0's shard with tensor parallel)
    runner: StepRunner  # a ModelRunner, or the tensor-parallel runner of serving/distributed
    local_runner: ModelRunner | None  # the in-process ModelRunner (None with tensor parallel)
    num_blocks: int  # KV blocks in the pool
    max_model_len: int
    tensor_parallel: TensorParallel | None  # the shard processes to close, with tensor parallel
    kv_groups: list[KVGroup]  # the model's KV-cache groups (serving/attention/layer_spec.py)
    group_blocks: list[int]  # blocks in each group's pool


def set_up_runner(
    cfg: EngineConfig, loaded: ModelInput | None, device: torch.device
) -> RunnerSetup:
    """Raises ValueError when the pool cannot hold one sequence or the limits contradict."""
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    pdl.set_mode(cfg.programmatic_launch)  # before any kernel runs, graph captures included
    dtype = cfg.resolve_dtype(device)
    kv_dtype = cfg.resolve_kv_dtype(dtype)  # fp8: e4m3 KV cache (GPU kernels)
    # tensor parallel: shard processes, rank 0's shard and its runner (serving/distributed)
    tensor_parallel: TensorParallel | None = None
    if cfg.tensor_parallel_size > 1:
        from serving.distributed.startup import start_tensor_parallel

        tensor_parallel = start_tensor_parallel(cfg, loaded, device, dtype, kv_dtype)
        loaded = cast("LoadedModel", tensor_parallel.loaded)
    elif loaded is None:
        from serving.loader import default_model_path, load_model_files

        loaded = load_model_files(cfg.model_path or default_model_path())
    model_files = cast("LoadedModel", loaded)  # a ModelSource comes with tensor parallel only
    groups = kv_groups(model_files.config.layers())
    if tensor_parallel is not None:
        group_blocks = [tensor_parallel.num_blocks]
    else:
        model = build_model(model_files.config, model_files.state_dict, device, dtype)
        elem = torch.empty((), dtype=kv_dtype).element_size()
        group_blocks = (
            [cfg.num_kv_blocks] * len(groups)
            if cfg.num_kv_blocks
            else (
                plan_group_blocks(
                    groups,
                    cfg.block_size,
                    elem,
                    cfg.kv_cache_memory_mb * 2**20,
                    cfg.max_num_seqs,
                    cfg.max_num_batched_tokens,
                )
            )
        )
    num_blocks = group_blocks[0]
    if num_blocks < 2:
        raise ValueError(
            f"kv_cache_memory_mb={cfg.kv_cache_memory_mb} holds {num_blocks} KV blocks; need at "
            "least 2"
        )
    if tensor_parallel is None:
        check_pool(groups, group_blocks, cfg.block_size, cfg.max_num_batched_tokens)
    limit = cfg.max_model_len or model_files.config.max_position_embeddings
    # a sequence must fit the full-attention pools alone, or preemption could never make room
    max_model_len = max_len_of_pool(groups, group_blocks, cfg.block_size, limit)
    if not cfg.enable_chunked_prefill and cfg.max_num_batched_tokens < max_model_len:
        raise ValueError(
            f"with chunked prefill off, max_num_batched_tokens ({cfg.max_num_batched_tokens}) "
            f"must be at least max_model_len ({max_model_len})"
        )
    local = None
    runner: StepRunner
    if tensor_parallel is not None:
        runner = tensor_parallel.runner
    else:
        runner = local = ModelRunner(
            model,
            model_files.config,
            num_blocks,
            cfg.block_size,
            device,
            kv_dtype,
            cfg.enable_cuda_graphs,
            group_blocks,
        )
        if local.gpu is not None and cfg.capture_graphs_at_start:
            local.gpu.capture_up_to(cfg.max_num_seqs)
    return RunnerSetup(
        model_files, runner, local, num_blocks, max_model_len, tensor_parallel, groups, group_blocks
    )
