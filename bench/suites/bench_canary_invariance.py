"""Batch invariance of the canary probes: does each shipped probe give the same greedy tokens (and
logprobs) alone as inside a busy batch? Real SmolLM2 GGUF, float32, CPU, one engine in-process.

    .venv/bin/python -m bench.suites.bench_canary_invariance [--batch 64] [--threads 2]

For each probe: one run alone, then one run inside a batch of `--batch` sequences (the probe plus
sampled filler chats; two thirds of them arrive with the probe, the rest two steps later, so the
probe's decode steps share the engine with other prompts' prefill chunks). Generation probes
compare their greedy tokens; the perplexity probe compares its reference text's prompt logprobs.
Writes bench/results/canary_invariance.md.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from bench.common.results_table import Table, write_results
from drift.detectors.canary import Observation, compare, perplexity
from serving.engine import EngineConfig, LLMEngine, build_engine
from serving.sampling_params import SamplingParams
from sidecar.canary.probes import Probe, load_probe_set

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def prompt_ids(engine: LLMEngine, probe: Probe) -> list[int]:
    tok = engine.tokenizer
    if probe.kind == "chat":
        messages = [m.model_dump() for m in probe.messages or []]
        return tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True))
    if probe.kind == "tokens":
        return list(probe.prompt_token_ids or [])
    return tok.encode(probe.text or "")


def probe_params(probe: Probe, seed: int) -> SamplingParams:
    if probe.kind == "perplexity":
        return SamplingParams(max_tokens=1, temperature=0.0, seed=seed, prompt_logprobs=0)
    return SamplingParams(
        max_tokens=probe.max_tokens, temperature=0.0, seed=seed, logprobs=0, ignore_eos=True
    )


def observe(out, probe: Probe) -> Observation:
    if probe.kind == "perplexity":
        scored = out.prompt_logprobs[1:]
        lps = [e.logprob for e in scored]
        return Observation.of([e.token_id for e in scored], lps, perplexity(lps))
    choice = out.outputs[0]
    return Observation.of(list(choice.token_ids), [e.logprob for e in choice.logprobs])


def run(
    engine: LLMEngine, arrivals: dict[int, list[tuple[str, list[int], SamplingParams]]]
) -> dict:
    finals, step, pending = {}, 0, dict(arrivals)
    while pending or engine.has_unfinished_requests():
        for rid, ids, params in pending.pop(step, []):
            engine.add_request(rid, ids, params)
        for out in engine.step():
            if out.finished:
                finals[out.request_id] = out
        step += 1
    return finals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    probe_set = load_probe_set()
    engine = build_engine(
        EngineConfig(device="cpu", max_num_seqs=max(64, args.batch), kv_cache_memory_mb=512)
    )
    fillers = probe_set.calibration.fillers or ["Tell me something."]
    table = Table(
        f"Alone vs in a batch of {args.batch} (CPU, float32, {args.threads} threads)",
        [
            "probe",
            "kind",
            "prompt tokens",
            "compared tokens",
            "identical tokens",
            "first divergence",
            "max abs logprob delta",
            "perplexity ratio",
            "seconds",
        ],
    )
    print(table.header())
    for probe in probe_set.probes:
        started = time.perf_counter()
        ids = prompt_ids(engine, probe)
        params = probe_params(probe, probe_set.seed)
        alone = observe(run(engine, {0: [("alone", ids, params)]})["alone"], probe)
        others = []
        for i in range(args.batch - 1):
            text = fillers[i % len(fillers)]
            filler_ids = engine.tokenizer.encode(
                engine.tokenizer.apply_chat_template(
                    [{"role": "user", "content": f"{text} ({i})"}], add_generation_prompt=True
                )
            )
            others.append(
                (
                    f"f{i}",
                    filler_ids,
                    SamplingParams(
                        max_tokens=probe.max_tokens, temperature=1.0, seed=i, ignore_eos=True
                    ),
                )
            )
        early = (2 * len(others)) // 3
        arrivals = {0: others[:early] + [("probe", ids, params)], 2: others[early:]}
        batched = observe(run(engine, arrivals)["probe"], probe)
        c = compare(alone, batched)
        line = table.add(
            probe.name, probe.kind, len(ids), len(alone.token_ids),
            "yes" if c.first_divergence is None else "no",
            "-" if c.first_divergence is None else c.first_divergence,
            f"{c.logprob_delta_max:.2e}",
            "-" if c.perplexity_ratio is None else f"{c.perplexity_ratio:.6f}",
            f"{time.perf_counter() - started:.1f}",
        )  # fmt: skip
        print(line, flush=True)
    notes = [
        "Generation probes: greedy tokens (ignore_eos, the probe's max_tokens); perplexity probe: "
        "the reference text's prompt logprobs (echo-style), compared token by token.",
        "Logprob deltas are taken before the first diverging token only.",
    ]
    print(write_results("canary_invariance", [table], notes))


if __name__ == "__main__":
    main()
