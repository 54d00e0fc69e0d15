"""bench_prefill part (b): running decode streams' time per output token alone, and while a long
prompt is chunked in beside them.

A stream's TPOT samples are the gaps between its successive tokens as the engine hands them out
(the host time between the steps that emit them). Alone: the gaps of `--decode-steps` steps of
the streams by themselves. While prefilling: `--reps` long prompts, one at a time; for each, the
gaps that end after its add_request and no later than the step that emits its first token (the
steps that carry its chunks), then `SETTLE` decode-only steps before the next.
"""

from __future__ import annotations

import time

import numpy as np

from bench.common.results_table import Table
from serving.sampling_params import SamplingParams

WARM = 4  # decode steps of the streams before anything is timed
SETTLE = 8  # decode-only steps after each long prompt's first token


def steps_per_prompt(args, budget: int) -> int:
    """Engine steps a long prompt takes beside the streams, with one step of read-back."""
    return -(-args.prompt_len // max(1, budget - args.streams)) + 2


def stream_tokens(args, budget: int) -> int:
    """Tokens each stream is allowed: enough to outlast the whole run at this budget."""
    per_prompt = steps_per_prompt(args, budget) + SETTLE
    return WARM + args.decode_steps + args.reps * per_prompt + 32


def streams_kv_tokens(args, budget: int) -> int:
    """KV tokens the streams and one long prompt need at this budget."""
    per_stream = args.stream_prompt + stream_tokens(args, budget) + 16
    return args.streams * per_stream + args.prompt_len + 16


class Streams:
    """The decode streams' token counts and last emission times, updated step by step."""

    def __init__(self, ids: list[str]):
        self.ids = set(ids)
        self.tokens: dict[str, int] = {}
        self.last: dict[str, float] = {}

    def step(self, engine) -> tuple[float, list, list[tuple[float, float]]]:
        """One engine step: its return time, its outputs, and (gap seconds, end) per token."""
        outs = engine.step()
        now = time.perf_counter()
        gaps = []
        for o in outs:
            rid = o.request_id
            if rid not in self.ids:
                continue
            n = len(o.outputs[0].token_ids)
            new = n - self.tokens.get(rid, 0)
            if new > 0:
                if rid in self.last:
                    gaps += [((now - self.last[rid]) / new, now)] * new
                self.tokens[rid], self.last[rid] = n, now
        return now, outs, gaps


def interference(engine, args, cfg: dict, budget: int) -> list[dict]:
    """The streams alone and while long prompts are chunked in, at this budget; two rows."""
    from bench.suites.bench_prefill import prompts, sync

    params = SamplingParams(
        max_tokens=stream_tokens(args, budget), temperature=0.0, ignore_eos=True
    )
    ids = [f"stream-{budget}-{i}" for i in range(args.streams)]
    vocab = cfg["vocab_size"]
    for rid, prompt in zip(
        ids, prompts(vocab, args.streams, args.stream_prompt, budget), strict=True
    ):
        engine.add_request(rid, prompt, params)
    streams = Streams(ids)
    while len(streams.tokens) < args.streams:  # their prefill
        streams.step(engine)
    for _ in range(WARM):
        streams.step(engine)
    sync(engine)
    alone: list[float] = []
    for _ in range(args.decode_steps):
        alone += [g for g, _ in streams.step(engine)[2]]
    during: list[float] = []
    ttfts: list[float] = []
    steps_to_first: list[int] = []
    long_params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    for r, prompt in enumerate(prompts(vocab, args.reps, args.prompt_len, 10_000 + budget)):
        rid = f"long-{budget}-{r}"
        t_add = time.perf_counter()
        engine.add_request(rid, prompt, long_params)
        gaps, steps = [], 0
        while True:
            now, outs, step_gaps = streams.step(engine)
            steps += 1
            gaps += step_gaps
            if any(o.request_id == rid and o.outputs[0].token_ids for o in outs):
                break
        during += [g for g, end in gaps if t_add < end <= now]
        ttfts.append(now - t_add)
        steps_to_first.append(steps)
        for _ in range(SETTLE):
            streams.step(engine)
    running = len(engine.scheduler.running)
    for rid in ids:
        engine.abort(rid)
    engine.set_async_scheduling(engine.async_scheduling)  # reads back a step still in flight
    engine.reset()
    if running != args.streams:
        raise RuntimeError(f"{running} of {args.streams} streams ran to the end")
    base = {"budget": budget, "streams": args.streams}
    return [
        {**base, "phase": "alone", "steps": args.decode_steps, "gaps": alone},
        {
            **base,
            "phase": f"while a {args.prompt_len}-token prompt is chunked in",
            "steps": sum(steps_to_first),
            "gaps": during,
            "ttft": ttfts,
            "steps_to_first": steps_to_first,
        },
    ]


def interference_table(args, rows: list[dict]) -> Table:
    table = Table(
        f"{args.shape}: TPOT of {args.streams} running decode streams (prompts of "
        f"{args.stream_prompt} tokens) alone and while a {args.prompt_len}-token prompt is "
        f"chunked in ({args.reps} prompts, one at a time)",
        [
            "max_num_batched_tokens",
            "phase",
            "engine steps",
            "gaps",
            "TPOT p50 ms",
            "TPOT p99 ms",
            "TPOT max ms",
            "TPOT p50 vs alone",
            "long prompt TTFT ms p50",
            "steps to its first token",
        ],
    )
    alone = {r["budget"]: float(np.median(r["gaps"])) for r in rows if r["phase"] == "alone"}
    for r in rows:
        gaps = np.asarray(r["gaps"]) * 1e3
        p50 = float(np.median(gaps))
        table.add(
            r["budget"],
            r["phase"],
            r["steps"],
            len(gaps),
            f"{p50:.2f}",
            f"{np.percentile(gaps, 99):.2f}",
            f"{gaps.max():.2f}",
            f"{p50 / 1e3 / alone[r['budget']]:.2f}x",
            f"{1e3 * float(np.median(r['ttft'])):.1f}" if "ttft" in r else "-",
            "/".join(str(s) for s in r["steps_to_first"]) if "steps_to_first" in r else "-",
        )
    return table
