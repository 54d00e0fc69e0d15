"""gpt-oss's attention sinks on the GPU: the Triton paged decode (split and unsplit) and prefill
kernels against the torch path, sliding and full, several head dims, bf16 and float32; and a tiny
gpt-oss checkpoint written by transformers, greedy through the engine on CUDA, token for token
equal to transformers' own `generate` (CPU, float32) on the same weights."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion
from moe_fixtures import gpt_oss_config, save_tiny_moe
from sink_cases import sink_errors

from serving.loader import load_model_files

pytestmark = pytest.mark.gpu
# max |kernel - torch path| over every output element: bf16 operands, probabilities and output
# (outputs reach ~4: a bf16 step there is 0.016); float32 runs the dots in tf32 (10-bit
# mantissas). A sink counted twice or not at all is off by SINK_EFFECT or more in these cases.
TOL = {torch.bfloat16: 6e-2, torch.float32: 2e-2}
SINK_EFFECT = 0.5

GEOMETRIES = [  # (q heads, kv heads, head_dim, window)
    (8, 2, 64, None),  # gpt-oss-like full layers
    (8, 2, 64, 128),  # gpt-oss-like sliding layers
    (4, 4, 128, 37),  # a window ending mid-block
    (8, 4, 256, None),
    (16, 1, 512, 100),
]
DECODE = [(c, 1) for c in (0, 5, 63, 64, 65, 300, 1500)]
PREFILL = [(0, 1), (0, 90), (200, 45), (13, 3), (64, 64), (1000, 130)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("geom", GEOMETRIES)
def test_decode_with_sinks_matches_the_torch_path(geom, dtype):
    hq, hk, hd, window = geom
    errs = sink_errors(
        DECODE, hq, hk, hd, window=window, dtype=dtype, splits=(1, 4, None), seed=hd + hq
    )
    assert errs["sink_effect"] > SINK_EFFECT  # the sinks matter in this case
    for path, err in errs.items():
        if path != "sink_effect":
            assert err < TOL[dtype], (path, err)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("geom", GEOMETRIES)
def test_prefill_with_sinks_matches_the_torch_path(geom, dtype):
    hq, hk, hd, window = geom
    errs = sink_errors(PREFILL, hq, hk, hd, window=window, dtype=dtype, seed=7 + hd)
    assert errs["sink_effect"] > SINK_EFFECT
    assert errs["prefill"] < TOL[dtype]


@pytest.mark.parametrize("sink_std", [0.01, 30.0])
def test_sinks_far_above_or_near_the_logits_stay_finite(sink_std):
    """A sink that dwarfs every logit (outputs near zero) must not overflow the rescaling."""
    for specs in (DECODE, PREFILL):
        errs = sink_errors(specs, 8, 2, 64, window=128, sink_std=sink_std, splits=(1, 8))
        for path, err in errs.items():
            if path != "sink_effect":
                assert err < TOL[torch.bfloat16], (sink_std, path, err)


# a token the engine picks may trail HF's argmax by this much in logits (a float32 near-tie)
TIE_LOGITS = 1e-2
PROMPT_LENS = (1, 9, 30, 47)  # most past the window (8)
NEW_TOKENS = 20


def _prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in PROMPT_LENS]


@pytest.mark.parametrize(
    "layer_types",
    [
        None,  # HF's default: sliding and full layers alternate (two KV-cache groups)
        ["full_attention"] * 4,  # one group: the fused forward and CUDA graphs run
    ],
)
def test_tiny_gpt_oss_on_cuda_equals_transformers_token_for_token(tmp_path, layer_types):
    extra = {} if layer_types is None else {"layer_types": layer_types}
    hf = save_tiny_moe(tmp_path, gpt_oss_config(**extra), seed=5)
    answers = []
    for p in _prompts():
        ids = torch.tensor([p])
        with torch.inference_mode():
            ref = hf.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False
            )
        answers.append(ref[0, len(p) :].tolist())
    loaded = load_model_files(tmp_path)
    # chunked prefill (a budget of 20 rows), blocks of 4: decode and prefill kernels both run
    engine = make_engine(loaded, device="cuda", dtype="float32", max_num_batched_tokens=20)
    assert engine.runner.backend.name == "triton"
    arrivals = {0: [(str(i), p, greedy(NEW_TOKENS)) for i, p in enumerate(_prompts())]}
    finals = run_to_completion(engine, arrivals)
    for i, (p, answer) in enumerate(zip(_prompts(), answers, strict=True)):
        ours = finals[str(i)].outputs[0].token_ids
        if ours == answer:
            continue
        # Where the sequences part, transformers' own logits (teacher-forced on the engine's
        # tokens) must show a near-tie that float32 on the GPU (TF32 dots) may decide either way.
        at = next(t for t, (a, b) in enumerate(zip(ours, answer, strict=True)) if a != b)
        with torch.inference_mode():
            logits = hf(torch.tensor([p + ours[:at]])).logits[0, -1].double()
        gap = float(logits.max() - logits[ours[at]])
        assert gap <= TIE_LOGITS, f"prompt {i}: token {at} is {gap:.4f} below HF's argmax"
