"""Our engine's generation throughput vs HF transformers `generate`, same prompts, same batch,
same model (SmolLM2-135M-Instruct from the shipped GGUF, float32, CPU), measured in one process.

    .venv/bin/python -m bench.suites.bench_engine_cpu [--batch 8] [--new-tokens 64] [--threads 2]

Both sides generate exactly `new-tokens` greedy tokens per prompt (ours: ignore_eos; HF:
min_new_tokens), so the token counts are equal; prefill is included in both timings; the two
alternate, best of --repeats each. Prints the tok/s of each and the ratio, and checks the greedy
tokens agree.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from bench.common.results_table import Table, write_results

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

QUESTIONS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain why the sky is blue to a ten year old.",
    "List five fruits and describe the color and taste of each one.",
    "Describe a three day trip to Rome, with a plan for each morning and evening.",
    "How do I make a cup of tea?",
    "Give me three tips for writing clean Python code, with a short example for each.",
    "What is a paged KV cache?",
    "Summarize the plot of Romeo and Juliet in a few sentences.",
    "Why do cats purr?",
    "Tell me a joke about computers.",
    "What are the planets of the solar system, in order from the sun?",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--hf-sequential", action="store_true", help="also time HF one request at a time"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import AutoModelForCausalLM

    from serving.engine import EngineConfig, build_engine
    from serving.loader import default_model_path, load_model_files
    from serving.sampling_params import SamplingParams

    path = default_model_path()
    loaded = load_model_files(path)
    # prefix caching off: repeats re-send the same prompts, and HF has no cache to match
    cfg = EngineConfig(device="cpu", kv_cache_memory_mb=256, enable_prefix_caching=False)
    engine = build_engine(cfg, loaded=loaded)
    tok = engine.tokenizer
    questions = (QUESTIONS * (args.batch // len(QUESTIONS) + 1))[: args.batch]
    prompts = [
        tok.encode(
            tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True)
        )
        for q in questions
    ]
    hf = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).eval()
    n = args.new_tokens
    total = n * len(prompts)

    # warm-up both (first-call allocations, thread pools)
    engine.add_request("warm", prompts[0], SamplingParams(max_tokens=2, temperature=0.0))
    while engine.has_unfinished_requests():
        engine.step()
    with torch.inference_mode():
        hf.generate(torch.tensor([prompts[0]]), max_new_tokens=2, do_sample=False)

    params = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)
    width = max(len(p) for p in prompts)
    pad = hf.generation_config.pad_token_id or 0
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])  # HF: one left-padded batch
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

    def run_ours(tag: str) -> tuple[float, dict[str, list[int]], int]:
        t0 = time.perf_counter()
        for i, p in enumerate(prompts):
            engine.add_request(f"{tag}{i}", p, params)
        done: dict[str, list[int]] = {}
        steps = 0
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    done[out.request_id[len(tag) :]] = out.outputs[0].token_ids
            steps += 1
        return time.perf_counter() - t0, done, steps

    def run_hf() -> tuple[float, torch.Tensor]:
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = hf.generate(
                ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False
            )
        return time.perf_counter() - t0, out

    # alternate the two, best of `repeats` each: the machine may be shared, and alternating keeps
    # a burst of outside load from landing on one side only
    t_ours = t_hf = float("inf")
    for r in range(args.repeats):
        t, ours, steps = run_ours(f"r{r}-")
        t_ours = min(t_ours, t)
        t, ref = run_hf()
        t_hf = min(t_hf, t)

    t_seq = None
    if args.hf_sequential:  # what a server without batching does: one generate per request
        t0 = time.perf_counter()
        with torch.inference_mode():
            for p in prompts:
                one = torch.tensor([p])
                hf.generate(
                    one,
                    attention_mask=torch.ones_like(one),
                    max_new_tokens=n,
                    min_new_tokens=n,
                    do_sample=False,
                )
        t_seq = time.perf_counter() - t0

    # agreement up to each HF row's first EOS (HF's min_new_tokens bans EOS after that point)
    eos = set(engine.eos_token_ids)
    agree = 0
    for i in range(len(prompts)):
        theirs = ref[i, width:].tolist()
        cut = next((k for k, t in enumerate(ours[str(i)]) if t in eos), n)
        agree += ours[str(i)][:cut] == theirs[:cut]

    print(
        f"SmolLM2-135M-Instruct (GGUF Q4_1 -> float32), CPU, {args.threads} threads, "
        f"batch {len(prompts)}, {n} new tokens each, prompts {min(map(len, prompts))}-{width} "
        "tokens"
    )
    print(
        f"  vigil engine : {total / t_ours:8.1f} tok/s  ({t_ours:.2f} s, {steps} steps, best of "
        f"{args.repeats})"
    )
    print(
        f"  HF generate  : {total / t_hf:8.1f} tok/s  ({t_hf:.2f} s, left-padded batch, best of "
        f"{args.repeats})"
    )
    print(f"  ratio (ours / HF): {t_hf / t_ours:.2f}x")
    if t_seq is not None:
        print(
            f"  HF generate one request at a time: {total / t_seq:8.1f} tok/s "
            f"(ours / that: {t_seq / t_ours:.2f}x)"
        )
    print(f"  greedy rows agreeing with HF (up to first EOS): {agree}/{len(prompts)}")
    table = Table(
        f"SmolLM2-135M-Instruct (GGUF Q4_1 -> float32), CPU, {args.threads} threads, batch "
        f"{len(prompts)}, {n} new tokens each, best of {args.repeats}",
        ["generator", "tok/s", "seconds"],
    )
    table.add("vigil engine", f"{total / t_ours:.1f}", f"{t_ours:.2f}")
    table.add("HF generate, left-padded batch", f"{total / t_hf:.1f}", f"{t_hf:.2f}")
    if t_seq is not None:
        table.add("HF generate, one request at a time", f"{total / t_seq:.1f}", f"{t_seq:.2f}")
    write_results(
        "engine_cpu",
        [table],
        [
            f"vigil / HF batch: {t_hf / t_ours:.2f}x",
            f"greedy rows agreeing with HF up to the first EOS: {agree}/{len(prompts)}",
        ],
    )


if __name__ == "__main__":
    main()
