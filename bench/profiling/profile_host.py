"""The engine's per-step host cost on the CPU
(`python -m bench.suites.bench_profile_step --device cpu`).

A tiny random Llama (2 layers, hidden 64, vocab 1024) keeps the model forward small, so what is
left of a step is the engine's own Python: scheduler, step-input tensors, sampler bookkeeping,
output processing. The forward is timed with module hooks and subtracted. Steps are averaged in
two windows — early (~30 generated tokens) and late (~`new` generated) — so per-step work that
grows with the sequence length shows as the late window being slower.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time

import torch

from bench.common.hf_random import hf_random_model, loaded_from_hf, make_engine
from bench.common.results_table import Table
from serving.sampling_params import SamplingParams

TINY = {
    "model_type": "llama",
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "bos_token_id": None,
    "eos_token_id": None,
}


def _window(engine, steps: int, fwd: list[float]) -> tuple[float, float]:
    """Mean (step wall, forward) seconds over `steps` engine steps."""
    fwd.clear()
    t0 = time.perf_counter()
    for _ in range(steps):
        engine.step()
    wall = (time.perf_counter() - t0) / steps
    return wall, sum(fwd) / steps


def profile_host(batch: int = 256, new: int = 480, prompt: int = 32, top: int = 14) -> Table:
    torch.set_num_threads(1)
    hf = hf_random_model(TINY, device="cpu")
    loaded = loaded_from_hf(hf, TINY, "tiny-llama")
    del hf
    engine = make_engine(
        loaded, max_num_seqs=batch, kv_tokens=batch * (prompt + new + 16), device="cpu"
    )
    fwd: list[float] = []
    start: list[float] = []
    model = engine.runner.model
    model.register_forward_pre_hook(lambda *_: start.append(time.perf_counter()))
    model.register_forward_hook(lambda *_: fwd.append(time.perf_counter() - start.pop()))
    params = SamplingParams(max_tokens=new + 8, temperature=0.0, ignore_eos=True)
    g = torch.Generator().manual_seed(0)
    for i in range(batch):
        engine.add_request(
            f"r{i}", torch.randint(0, TINY["vocab_size"], (prompt,), generator=g).tolist(), params
        )
    engine.step()  # the prefill (all prompts fit one step's token budget)
    for _ in range(19):
        engine.step()
    early = _window(engine, 20, fwd)  # generated 20 -> 40
    for _ in range(new - 60 - 40):
        engine.step()
    late = _window(engine, 20, fwd)  # generated new-60 -> new-40
    prof = cProfile.Profile()
    prof.enable()
    late_prof = _window(engine, 20, fwd)
    prof.disable()
    table = Table(
        f"CPU host cost per engine step, tiny random model, batch {batch}",
        ["window", "step ms", "forward ms", "host (step - forward) ms"],
    )
    for name, (wall, f) in (
        ("early (~30 generated)", early),
        (f"late (~{new - 50} generated)", late),
    ):
        table.add(name, f"{wall * 1e3:.2f}", f"{f * 1e3:.2f}", f"{(wall - f) * 1e3:.2f}")
        print(
            f"{name}: step {wall * 1e3:.2f} ms, forward {f * 1e3:.2f} ms, "
            f"host (step - forward) {(wall - f) * 1e3:.2f} ms  [batch {batch}]"
        )
    print(f"late, under cProfile: step {late_prof[0] * 1e3:.2f} ms")
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(r"serving/(engine|sampler|outputs)", top)
    print(buf.getvalue())
    return table
