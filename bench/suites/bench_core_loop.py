"""What the engine-core process adds to each engine step, on the host: the offline engine's step
(outputs as RequestOutputs) against the core loop's iteration (commands read, the step with
token deltas, StepOutputs encoded and pushed over ZeroMQ to a reader process), both on a tiny
random model on the CPU with the model forward timed by hooks and subtracted, so what is compared
is the Python around it. The core runs both ways: every advance a RequestDelta (the earlier
protocol) and one-token advances as `TokenRows`. All run with the start-up heap frozen
(serving/heap.py), as the core process runs; a second table times one full garbage collection
over the same process's heap, unfrozen and frozen: the stall every stream sees when the core
collects.

    .venv/bin/python -m bench.suites.bench_core_loop [--seqs 64,256] [--steps 200]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import tempfile
import time

import torch
import zmq

from bench.common.hf_random import hf_random_model, loaded_from_hf, make_engine
from bench.common.results_table import Table, write_results
from bench.profiling.profile_host import TINY
from serving.engine.frontend.core_process import CoreLoop
from serving.engine.frontend.messages import Codec
from serving.engine.frontend.token_deltas import token_deltas
from serving.heap import freeze_startup_heap
from serving.sampling_params import SamplingParams


def _engine(loaded, seqs: int, steps: int, core: bool, rows: bool = True):
    engine = make_engine(
        loaded,
        max_num_seqs=seqs,
        kv_tokens=seqs * (128 + 2 * steps + 64),
        device="cpu",
        output=token_deltas(rows) if core else None,
    )
    g = torch.Generator().manual_seed(0)
    params = SamplingParams(max_tokens=2 * steps + 40, temperature=0.0, ignore_eos=True)
    for i in range(seqs):
        engine.add_request(
            f"r{i}", torch.randint(0, TINY["vocab_size"], (128,), generator=g).tolist(), params
        )
    for _ in range(20):  # the prefill and a few decode steps
        engine.step()
    freeze_startup_heap()
    return engine


class _Forward:
    """Seconds spent in the model forward (module hooks)."""

    def __init__(self, model: torch.nn.Module):
        self.total, self._start = 0.0, 0.0
        model.register_forward_pre_hook(self._pre)
        model.register_forward_hook(self._post)

    def _pre(self, *_):
        self._start = time.perf_counter()

    def _post(self, *_):
        self.total += time.perf_counter() - self._start


def _offline_us(loaded, seqs: int, steps: int) -> float:
    engine = _engine(loaded, seqs, steps, core=False)
    fwd = _Forward(engine.runner.model)
    t0 = time.perf_counter()
    for _ in range(steps):
        engine.step()
    elapsed = time.perf_counter() - t0
    gc.unfreeze()
    return 1e6 * (elapsed - fwd.total) / steps


def _drain(address: str, messages: int) -> None:
    """The API side's reader: another process, as the API server is."""
    ctx = zmq.Context()
    reader = ctx.socket(zmq.PULL)
    reader.bind(address)
    for _ in range(messages):
        reader.recv(copy=False)
    reader.close(linger=0)
    ctx.term()


def _core_us(loaded, seqs: int, steps: int, rows: bool = True) -> tuple[float, float]:
    """Host microseconds per iteration outside the forward, and of them the output side's
    (the engine's emit of deltas or rows, encoding and sending)."""
    engine = _engine(loaded, seqs, steps, core=True, rows=rows)
    fwd = _Forward(engine.runner.model)
    address = f"ipc://{tempfile.mkdtemp(prefix='vigil-core-loop-')}/outputs"
    reader = multiprocessing.get_context("spawn").Process(target=_drain, args=(address, steps))
    reader.start()
    ctx = zmq.Context()
    inbox, outbox = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    inbox.bind(f"inproc://commands-{os.getpid()}")
    outbox.connect(address)
    loop = CoreLoop(engine, inbox, [outbox], Codec(), parent_pid=0)
    outputs = _Timed()
    engine._emit, loop._send = outputs.wrap(engine._emit), outputs.wrap(loop._send)
    t0 = time.perf_counter()
    for _ in range(steps):
        deltas, failed = [], []
        loop._handle_commands(deltas, failed)
        loop._step(deltas, failed)
        loop._send(deltas, failed)
    elapsed = time.perf_counter() - t0
    gc.unfreeze()
    reader.join(timeout=30)
    inbox.close(linger=0)
    outbox.close(linger=0)
    ctx.term()
    return 1e6 * (elapsed - fwd.total) / steps, 1e6 * outputs.total / steps


class _Timed:
    """Seconds spent in the wrapped calls."""

    def __init__(self):
        self.total = 0.0

    def wrap(self, fn):
        def timed(*a, **kw):
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.total += time.perf_counter() - start

        return timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seqs", default="64,256")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hf = hf_random_model(TINY, device="cpu")
    loaded = loaded_from_hf(hf, TINY, "tiny-llama")
    del hf
    table = Table(
        f"host microseconds per decode step outside the model forward, tiny model on the CPU, "
        f"{args.steps} steps, best of 2 (runs interleaved)",
        [
            "sequences",
            "offline engine step",
            "core iteration: deltas",
            "core iteration: rows",
            "core (rows) / offline",
            "core output side: deltas",
            "core output side: rows",
            "output side deltas / rows",
        ],
    )
    print(table.header(), flush=True)
    for seqs in [int(s) for s in args.seqs.split(",")]:
        offline, deltas, rows = [], [], []
        for _ in range(2):
            offline.append(_offline_us(loaded, seqs, args.steps))
            deltas.append(_core_us(loaded, seqs, args.steps, rows=False))
            rows.append(_core_us(loaded, seqs, args.steps, rows=True))
        best_off, (d_all, d_out), (r_all, r_out) = min(offline), min(deltas), min(rows)
        print(
            table.add(
                seqs,
                f"{best_off:.0f}",
                f"{d_all:.0f}",
                f"{r_all:.0f}",
                f"{r_all / best_off:.2f}",
                f"{d_out:.0f}",
                f"{r_out:.0f}",
                f"{d_out / r_out:.2f}",
            ),
            flush=True,
        )
    write_results("core_loop", [table, _full_collection(loaded)])


def _full_collection(loaded) -> Table:
    """One full collection's time with an engine of 256 running sequences alive, before and after
    the start-up heap is frozen."""
    table = Table(
        "one full garbage collection (generation 2) with a 256-sequence engine alive",
        ["heap", "objects the collector scans", "ms"],
    )
    engine = _engine(loaded, 256, 50, core=True)  # (freezes: undone to time the unfrozen pass)
    gc.unfreeze()
    gc.collect()
    for label in ("unfrozen", "frozen"):
        if label == "frozen":
            gc.freeze()
        t0 = time.perf_counter()
        gc.collect()
        ms = 1e3 * (time.perf_counter() - t0)
        print(table.add(label, len(gc.get_objects()), f"{ms:.1f}"), flush=True)
    gc.unfreeze()
    del engine
    return table


if __name__ == "__main__":
    main()
