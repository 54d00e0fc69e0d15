"""The choice of the layers' all-reduce (serving/distributed/all_reduce.py) on CPU: gloo whatever
the setting, an unknown setting refused, a failed symmetric-memory rendezvous falls back to the
group's all-reduce with one log line, and the one-shot path is taken from the shape alone."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.distributed as dist

from serving.distributed import all_reduce as ar
from serving.distributed.context import ParallelContext
from serving.distributed.group import free_port


@pytest.fixture
def one_rank():
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        yield ParallelContext(0, 1, dist.group.WORLD, dist.new_group(backend="gloo"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("mode", ["auto", "nccl", "symm_mem"])
def test_cpu_uses_the_group_all_reduce(one_rank, mode):
    tp = ar.with_all_reduce(one_rank, mode, torch.device("cpu"), torch.float32, 64, 32)
    assert tp.all_reduce_name == "gloo"
    t = torch.arange(6.0)
    assert torch.equal(tp.all_reduce(t), torch.arange(6.0))  # one rank: the sum is itself


def test_unknown_mode_is_refused(one_rank):
    with pytest.raises(ValueError, match="tp_allreduce"):
        ar.make_all_reduce("fast", one_rank, torch.device("cpu"), torch.float32, 1024)


def test_failed_rendezvous_falls_back_with_one_line(one_rank, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no rendezvous today")

    monkeypatch.setattr(ar, "_symm_mem_usable", lambda device, world_size: None)
    monkeypatch.setattr(ar, "SymmMemAllReduce", broken)
    with caplog.at_level(logging.INFO, logger="vigil.tensor_parallel"):
        reducer = ar.make_all_reduce(
            "auto", one_rank, torch.device("cuda", 0), torch.bfloat16, 1024
        )
    assert reducer.name == "gloo"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "no rendezvous today" in lines[0] and "NCCL" in lines[0]


def test_unusable_symm_mem_falls_back(one_rank, monkeypatch, caplog):
    monkeypatch.setattr(ar, "_symm_mem_usable", lambda device, world_size: "no peer access")
    with caplog.at_level(logging.INFO, logger="vigil.tensor_parallel"):
        reducer = ar.make_all_reduce(
            "symm_mem", one_rank, torch.device("cuda", 0), torch.bfloat16, 1024
        )
    assert reducer.name == "gloo" and "no peer access" in caplog.text


def test_symm_mem_usable_says_why_not_on_cpu():
    assert ar._symm_mem_usable(torch.device("cpu"), 2) == "not on CUDA"
    assert "world size" in ar._symm_mem_usable(torch.device("cuda", 0), 16)


def test_one_shot_is_chosen_from_the_shape_alone():
    reducer = object.__new__(ar.SymmMemAllReduce)
    reducer.numel, reducer.dtype = 4096, torch.bfloat16
    assert reducer.fits(torch.zeros(1, 2048, dtype=torch.bfloat16))
    assert reducer.fits(torch.zeros(2, 2048, dtype=torch.bfloat16))
    assert not reducer.fits(torch.zeros(3, 2048, dtype=torch.bfloat16))  # over the buffer: NCCL
    assert not reducer.fits(torch.zeros(2, 2048, dtype=torch.float32))  # another dtype
    assert not reducer.fits(torch.zeros(2048, 2, dtype=torch.bfloat16).t())  # not contiguous
    assert not reducer.fits(torch.zeros(3, dtype=torch.bfloat16))  # 6 bytes: not 16-byte sized
    assert not reducer.fits(torch.zeros(0, dtype=torch.bfloat16))


def test_tp_engine_reports_its_all_reduce(tmp_path):
    from engine_fixtures import make_engine, save_tiny_model

    from serving.loader import load_model_files

    save_tiny_model("llama", tmp_path, seed=2)
    engine = make_engine(
        load_model_files(tmp_path), tensor_parallel_size=2, torch_threads=1, tp_allreduce="symm_mem"
    )
    try:
        assert engine.tensor_parallel.all_reduce_name == "gloo"
    finally:
        engine.close()
