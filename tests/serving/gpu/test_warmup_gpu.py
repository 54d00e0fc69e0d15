"""After the start-up warm-up, serving compiles no Triton kernel: prompts of many lengths,
prefix-cache hits, requests joining running decodes (mixed steps) and a long decode."""

from __future__ import annotations

import random

from serving.sampling_params import SamplingParams


def compiled_variants() -> dict[str, int]:
    """Compiled variants per Triton kernel of serving/kernels (an autotuned kernel counts every
    configuration it benchmarked)."""
    from serving.kernels import (
        fused_ops,
        gemv,
        kv_write,
        paged_decode,
        paged_prefill,
        qkv_rope_cache,
    )

    counts = {}
    for module in (fused_ops, gemv, kv_write, paged_decode, paged_prefill, qkv_rope_cache):
        for name, obj in vars(module).items():
            jit = obj.fn if hasattr(obj, "configs") else obj  # an Autotuner wraps the JITFunction
            caches = getattr(jit, "device_caches", None)
            if caches is None:
                continue
            counts[f"{module.__name__}.{name}"] = sum(len(entry[0]) for entry in caches.values())
    assert counts, "no Triton kernel found: the JITFunction cache layout changed"
    return counts


def _run(engine) -> None:
    while engine.has_unfinished_requests():
        engine.step()


def test_serving_after_warm_up_compiles_nothing():
    from serving.engine import build_engine
    from serving.engine.config import EngineConfig
    from serving.loader.random_weights import random_loaded
    from vigil.devtools.model_shapes import SHAPES

    cfg = EngineConfig(device="cuda", dtype="bfloat16", kv_cache_memory_mb=1024, max_num_seqs=16)
    engine = build_engine(cfg, loaded=random_loaded(SHAPES["smollm2-135m"], seed=0, device="cuda"))
    before = compiled_variants()
    rng = random.Random(0)
    short = SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(1, 300))] for _ in range(12)]
    for i, prompt in enumerate(prompts + prompts[:4]):  # alone, then four prefix-cache hits
        engine.add_request(f"alone-{i}", prompt, short)
        _run(engine)
    longer = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    for wave, size in enumerate((4, 5, 3, 2)):  # each wave joins the decodes of the ones before
        for j in range(size):
            n = rng.randint(1, 200)
            engine.add_request(f"wave-{wave}-{j}", [rng.randrange(1000) for _ in range(n)], longer)
        for _ in range(3):
            engine.step()
    _run(engine)
    engine.add_request(
        "long", [1, 2, 3], SamplingParams(max_tokens=400, temperature=0.0, ignore_eos=True)
    )
    _run(engine)
    after = compiled_variants()
    grown = {k: (before.get(k, 0), v) for k, v in after.items() if v != before.get(k, 0)}
    assert not grown, f"kernels compiled while serving (before, after): {grown}"
