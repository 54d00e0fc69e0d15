"""The KV-write kernel (exact scatter, -1 slots untouched) and the FP8 e4m3 cache path."""

from __future__ import annotations

import pytest
import torch
from gpu_attention_ref import make_case, per_seq_rel_errors, reference_attention

from serving.kernels.kv_write import write_kv
from serving.kernels.paged_decode import paged_decode
from serving.kernels.paged_prefill import paged_prefill

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hk,d", [(3, 64), (8, 128), (4, 128)])
def test_write_kv_scatters_exactly_and_skips_negative_slots(hk, d):
    g = torch.Generator(device="cuda").manual_seed(hk * d)
    nb, bs, t = 64, 16, 200
    k_cache = torch.randn(nb, bs, hk, d, device="cuda", generator=g).bfloat16()
    v_cache = torch.randn(nb, bs, hk, d, device="cuda", generator=g).bfloat16()
    before_k, before_v = k_cache.clone(), v_cache.clone()
    # key/value as views of a fused projection, like the model passes them
    fused = torch.randn(t, (8 + 2 * hk) * d, device="cuda", generator=g).bfloat16()
    key = fused[:, 8 * d : (8 + hk) * d].view(t, hk, d)
    value = fused[:, (8 + hk) * d :].view(t, hk, d)
    slots = torch.randperm(nb * bs, device="cuda", generator=g)[:t]
    slots[::7] = -1
    write_kv(key, value, k_cache, v_cache, slots)
    keep = slots >= 0
    expect_k, expect_v = before_k.view(-1, hk, d).clone(), before_v.view(-1, hk, d).clone()
    expect_k[slots[keep]] = key[keep]
    expect_v[slots[keep]] = value[keep]
    assert torch.equal(k_cache.view(-1, hk, d), expect_k)
    assert torch.equal(v_cache.view(-1, hk, d), expect_v)


def test_write_kv_fp8_matches_torch_quantisation():
    g = torch.Generator(device="cuda").manual_seed(1)
    nb, bs, hk, d, t = 32, 16, 4, 128, 100
    k_cache = torch.zeros(nb, bs, hk, d, device="cuda", dtype=torch.float8_e4m3fn)
    v_cache = torch.zeros_like(k_cache)
    key = (torch.randn(t, hk, d, device="cuda", generator=g) * 3).bfloat16()
    value = (torch.randn(t, hk, d, device="cuda", generator=g) * 3).bfloat16()
    key[0, 0, :4] = torch.tensor([1000.0, -1000.0, 1e-4, 0.0])  # saturation and tiny values
    slots = torch.randperm(nb * bs, device="cuda", generator=g)[:t]
    k_scale, v_scale = 0.5, 2.0
    write_kv(key, value, k_cache, v_cache, slots, k_scale, v_scale)
    expect_k = (key.float() / k_scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    expect_v = (value.float() / v_scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    got_k = k_cache.view(-1, hk, d)[slots]
    got_v = v_cache.view(-1, hk, d)[slots]
    # bit-exact: same round-to-nearest-even conversion
    assert torch.equal(got_k.view(torch.uint8), expect_k.view(torch.uint8))
    assert torch.equal(got_v.view(torch.uint8), expect_v.view(torch.uint8))


@pytest.mark.parametrize("kind", ["decode", "prefill"])
def test_fp8_cache_attention_matches_dequantised_reference(kind):
    k_scale, v_scale = 0.25, 0.5
    specs = [(c, 1) for c in (0, 31, 700, 5000)] if kind == "decode" else [(0, 60), (300, 33)]
    case = make_case(specs, 32, 8, 128, seed=21)
    k8 = (case.k_cache.float() / k_scale).to(torch.float8_e4m3fn)
    v8 = (case.v_cache.float() / v_scale).to(torch.float8_e4m3fn)
    out = torch.full_like(case.query, float("nan"))
    m = case.meta
    if kind == "decode":
        paged_decode(
            case.query,
            k8,
            v8,
            m.block_tables,
            m.seq_lens,
            m.query_start_loc,
            out,
            0.088,
            m.max_seq_len,
            k_scale,
            v_scale,
        )
    else:
        paged_prefill(
            case.query,
            k8,
            v8,
            m.block_tables,
            m.seq_lens,
            m.query_start_loc,
            out,
            0.088,
            m.max_query_len,
            k_scale,
            v_scale,
        )
    ref_deq = reference_attention(case.query, k8, v8, m, 0.088, k_scale, v_scale)
    assert max(per_seq_rel_errors(out, ref_deq, case.query_lens)) < 1e-2
    # and the quantisation itself costs a few percent against the bf16 cache, no more
    ref_bf16 = reference_attention(case.query, case.k_cache, case.v_cache, m, 0.088)
    assert max(per_seq_rel_errors(out, ref_bf16, case.query_lens)) < 0.1
