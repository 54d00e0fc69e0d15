"""Programmatic dependent launch (serving/kernels/pdl.py) changes when kernels start, never what
they compute: a chain of decode kernels replayed from a CUDA graph with PDL gives the same bits
as without it (a kernel reading before its predecessor finished would not), and so does the
engine's greedy decode, tokens and logprobs."""

from __future__ import annotations

import pytest
import torch

from serving.kernels import pdl
from serving.kernels.fused_ops import rms_norm
from serving.kernels.gemv import gemv, gemv_rms_norm, gemv_silu

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


@pytest.fixture
def pdl_mode():
    yield pdl.set_mode
    pdl.set_mode("auto")


def test_mode_follows_the_device():
    pdl.set_mode("auto")
    assert pdl.enabled(torch.device("cuda")) == HOPPER
    pdl.set_mode("off")
    assert not pdl.enabled(torch.device("cuda"))
    pdl.set_mode("auto")


def _layers(hidden: int, inter: int, count: int, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def w(*shape, scale=0.03):
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(torch.bfloat16)

    return [
        {
            "norm1": 1 + w(hidden, scale=0.1),
            "wo": w(hidden, hidden),
            "norm2": 1 + w(hidden, scale=0.1),
            "gate_up": w(2 * inter, hidden),
            "down": w(hidden, inter),
        }
        for _ in range(count)
    ]


def _chain(layers, x: torch.Tensor) -> torch.Tensor:
    """A decode layer's kernel order at batch 1, without attention: each kernel reads what the one
    just before it wrote (norm -> GEMV -> norm -> GEMV -> GEMV with SiLU)."""
    residual = torch.zeros_like(x)
    hidden = x
    for p in layers:
        normed = rms_norm(hidden, p["norm1"], 1e-6, residual=residual)
        hidden = gemv(normed, p["wo"])
        gate_up, residual = gemv_rms_norm(hidden, residual, p["norm2"], 1e-6, p["gate_up"])
        hidden = gemv_silu(gate_up, p["down"])
    return hidden + residual


@pytest.mark.parametrize("hidden,inter", [(2560, 9728), (576, 1536)])
def test_graphed_chain_with_pdl_gives_the_same_bits(pdl_mode, hidden, inter):
    layers = _layers(hidden, inter, count=12)
    x = torch.randn(1, hidden, device="cuda").to(torch.bfloat16)
    pdl_mode("off")
    expected = _chain(layers, x.clone())
    pdl_mode("auto")
    static_x = x.clone()
    _chain(layers, static_x)  # autotuning and compiles before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _chain(layers, static_x)
    for _ in range(20):  # replays back to back: any early read would show in some replay
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, expected)
    # a new input through the same graph follows it (the replay reads the input, not a stale copy)
    static_x.copy_(torch.randn(1, hidden, device="cuda").to(torch.bfloat16))
    pdl_mode("off")
    fresh = _chain(layers, static_x.clone())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, fresh) and not torch.equal(fresh, expected)


def test_engine_decode_is_identical_with_and_without_pdl(pdl_mode):
    """Greedy decode of random Qwen3 models, one with the norm read inside the GEMVs (1,024
    features) and one with separate norm kernels (2,048): tokens and logprobs bit for bit."""
    from serving.engine import build_engine
    from serving.engine.config import EngineConfig
    from serving.loader.random_weights import random_loaded
    from serving.sampling_params import SamplingParams
    from vigil.devtools.model_shapes import SHAPES

    wide = dict(SHAPES["qwen3-0.6b"], hidden_size=2048, intermediate_size=6144, num_hidden_layers=6)
    narrow = dict(SHAPES["qwen3-0.6b"], num_hidden_layers=6)
    for shape in (narrow, wide):
        loaded = random_loaded(shape, seed=5, device="cuda")
        runs = []
        for mode in ("off", "auto"):
            cfg = EngineConfig(
                device="cuda",
                dtype="bfloat16",
                block_size=16,
                num_kv_blocks=128,
                max_num_seqs=4,
                enable_prefix_caching=False,
                programmatic_launch=mode,
            )
            engine = build_engine(cfg, loaded=loaded)
            assert pdl.enabled(torch.device("cuda")) == (mode == "auto" and HOPPER)
            g = torch.Generator().manual_seed(1)
            params = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True, logprobs=2)
            outs = {}

            def drain(engine=engine, outs=outs):
                while engine.has_unfinished_requests():
                    for out in engine.step():
                        if out.finished:
                            outs[out.request_id] = out.outputs[0]

            for i, n in enumerate((48, 7, 130)):  # batch 1 first, then two at once
                engine.add_request(
                    f"r{i}",
                    torch.randint(0, shape["vocab_size"], (n,), generator=g).tolist(),
                    params,
                )
                if i == 0:
                    drain()
            drain()
            assert len(outs) == 3
            runs.append(
                {
                    rid: (list(o.token_ids), [(t.logprob, t.top) for t in o.logprobs])
                    for rid, o in outs.items()
                }
            )
            del engine
        assert runs[0] == runs[1]
