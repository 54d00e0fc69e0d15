"""A tensor-parallel worker process (ranks 1..N-1): `python -m serving.distributed.worker R W`,
where R and W are the pipe descriptors the driver passed (see launcher.py).

It loads its shard, reports "loaded", takes the KV pool size from the driver, joins the process
group, builds its model and KV cache, reports "ready", then runs whatever the driver broadcasts
until STOP. It exits by itself when the driver's process is gone.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch and the engine load in the worker after it has started
    import torch

    from serving.distributed.launcher import WorkerLaunch
    from serving.distributed.step_channel import StepChannel
    from serving.engine.worker.runner import ModelRunner

PARENT_POLL_S = 1.0


def rank_device(device_type: str, rank: int) -> torch.device:
    import torch

    if device_type != "cuda":
        return torch.device("cpu")
    if torch.cuda.device_count() <= rank:
        raise RuntimeError(
            f"rank {rank} needs CUDA device {rank}; {torch.cuda.device_count()} visible"
        )
    torch.cuda.set_device(rank)
    return torch.device("cuda", rank)


def _exit_when_orphaned(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent_pid:
            os._exit(3)


def main(fd_in: int, fd_out: int) -> int:
    from serving.distributed.group import apply_nccl_env

    apply_nccl_env()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver stops the group
    inbox, outbox = Connection(fd_in, writable=False), Connection(fd_out, readable=False)
    launch = pickle.loads(inbox.recv_bytes())
    threading.Thread(target=_exit_when_orphaned, args=(launch.parent_pid,), daemon=True).start()
    try:
        runner, channel, model = _start(launch, inbox, outbox)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        outbox.send(
            ("failed", f"tensor-parallel worker rank {launch.rank}: {type(exc).__name__}: {exc}")
        )
        return 1
    outbox.send(("ready", None))
    _serve(runner, channel, model)
    channel.close()
    from serving.distributed.group import destroy_group

    if runner.gpu is not None:
        runner.gpu.release_graphs()  # graphs that hold NCCL collectives block leaving the group

    destroy_group()
    # no interpreter teardown: CUDA and NCCL destructors at exit can wait on the other ranks
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _start(
    launch: WorkerLaunch, inbox: Connection, outbox: Connection
) -> tuple[ModelRunner, StepChannel, Any]:
    import torch

    from serving.distributed.all_reduce import with_all_reduce
    from serving.distributed.group import init_group
    from serving.distributed.partition import rank_config
    from serving.distributed.step_channel import StepChannel
    from serving.engine.worker.runner import ModelRunner
    from serving.kernels import pdl
    from serving.loader.shard import ShardSpec
    from serving.model import build_model

    cfg = launch.config
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    device = rank_device(cfg.resolve_device().type, launch.rank)
    dtype = cfg.resolve_dtype(device)
    loaded = launch.source.load_shard(ShardSpec(launch.rank, launch.world_size), device, dtype)
    outbox.send(("loaded", None))
    num_blocks = inbox.recv()
    tp = init_group(launch.rank, launch.world_size, launch.port, device, launch.init_timeout_s)
    tp = with_all_reduce(
        tp, cfg.tp_allreduce, device, dtype, cfg.max_num_batched_tokens, loaded.config.hidden_size
    )
    model = build_model(loaded.config, loaded.state_dict, device, dtype, tp=tp)
    local = rank_config(loaded.config, launch.world_size, launch.rank)
    del loaded
    pdl.set_mode(cfg.programmatic_launch)
    runner = ModelRunner(
        model,
        local,
        num_blocks,
        cfg.block_size,
        device,
        cfg.resolve_kv_dtype(dtype),
        cfg.enable_cuda_graphs,
    )
    return runner, StepChannel(tp, device), model


def _serve(runner: ModelRunner, channel: StepChannel, model: Any) -> None:
    import torch

    from serving.distributed.step_channel import LOGITS, STEP, STOP, DeviceStep
    from serving.distributed.tp_runner import run_step

    dtype = next(model.parameters()).dtype
    prev_ids = None  # the previous step's sampled ids, broadcast by the driver (async scheduling)
    with torch.inference_mode():
        while True:
            cmd, payload = channel.receive(model.config.hidden_size, dtype)
            if cmd == STEP:
                assert isinstance(payload, DeviceStep)
                run_step(runner, payload, prev_ids)
                shared = payload.share_samples and payload.num_samples
                prev_ids = channel.receive_samples(payload.num_samples) if shared else None
            elif cmd == LOGITS:
                model.compute_logits(payload)
            elif cmd == STOP:
                return


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
