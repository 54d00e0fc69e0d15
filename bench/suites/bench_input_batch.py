"""Host time of a step's inputs: the runner's persistent `InputBatch` against the step rebuilt
from the scheduled sequences (`build_step_inputs`, block tables from the lists), both on the
very same steps of one engine run. A tiny random model on the CPU drives the engine; at each
step both builders run (in alternating order) on the same scheduler output, and their wall times
are summed. Workloads: steady decode of B streams, and B streams staggered (each request's
length differs, a finished one is replaced at once, so steps mix prompts and decodes and rows
change hands), with async scheduling on (every decode row's id is on the device) and off.

    .venv/bin/python -m bench.suites.bench_input_batch [--seqs 64,256] [--steps 200]
"""

from __future__ import annotations

import argparse
import time

import torch

from bench.common.hf_random import hf_random_model, loaded_from_hf, make_engine
from bench.common.results_table import Table, write_results
from bench.profiling.profile_host import TINY
from serving.engine.worker.input_batch import InputBatch
from serving.engine.worker.step_inputs import build_step_inputs
from serving.sampling_params import SamplingParams


def timed_run(loaded, seqs: int, steps: int, staggered: bool, async_on: bool) -> dict:
    """Summed seconds of each builder over `steps` engine steps, and sequences built."""
    engine = make_engine(
        loaded, max_num_seqs=seqs, kv_tokens=seqs * (64 + 2 * steps + 64), device="cpu"
    )
    engine.set_async_scheduling(async_on)
    totals = {"rebuilt": 0.0, "persistent": 0.0, "rows": 0, "steps": 0}
    real = InputBatch.build
    flip = [False]

    def both(self, scheduled, targets, pending=None):
        def rebuilt():
            return build_step_inputs(scheduled, targets, self.block_size, self.device, pending)

        def persistent():
            return real(self, scheduled, targets, pending)

        order = [("rebuilt", rebuilt), ("persistent", persistent)]
        flip[0] = not flip[0]
        result = None
        for name, fn in order[::-1] if flip[0] else order:
            t0 = time.perf_counter()
            out = fn()
            totals[name] += time.perf_counter() - t0
            if name == "persistent":
                result = out
        totals["rows"] += len(scheduled)
        totals["steps"] += 1
        return result

    g = torch.Generator().manual_seed(0)
    count = [0]

    def add() -> None:
        i = count[0]
        count[0] += 1
        length = (24 + (i * 37) % 96) if staggered else 2 * steps + 64
        params = SamplingParams(max_tokens=length, temperature=0.0, ignore_eos=True)
        prompt = torch.randint(0, TINY["vocab_size"], (32 + i % 32,), generator=g).tolist()
        engine.add_request(f"r{i}", prompt, params)

    for _ in range(seqs):
        add()
    for _ in range(8):  # the prefills
        engine.step()
    InputBatch.build = both
    try:
        for _ in range(steps):
            for out in engine.step():
                if out.finished and staggered:
                    add()
    finally:
        InputBatch.build = real
    return totals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seqs", default="64,256")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hf = hf_random_model(TINY, device="cpu")
    loaded = loaded_from_hf(hf, TINY, "tiny-llama")
    table = Table(
        "Step inputs, host microseconds per scheduled sequence (same steps, both builders)",
        ["streams", "workload", "async", "steps", "rebuilt us/seq", "persistent us/seq", "ratio"],
    )
    for seqs in [int(s) for s in args.seqs.split(",")]:
        for staggered in (False, True):
            for async_on in (True, False):
                t = timed_run(loaded, seqs, args.steps, staggered, async_on)
                before = t["rebuilt"] / t["rows"] * 1e6
                after = t["persistent"] / t["rows"] * 1e6
                print(
                    table.add(
                        seqs,
                        "staggered" if staggered else "steady decode",
                        "on" if async_on else "off",
                        t["steps"],
                        f"{before:.2f}",
                        f"{after:.2f}",
                        f"{before / after:.1f}x",
                    ),
                    flush=True,
                )
    write_results(
        "input_batch",
        [table],
        [
            "ratio: rebuilt / persistent on the same scheduler outputs; the tiny model's forward "
            "is not in either figure.",
        ],
    )


if __name__ == "__main__":
    main()
