"""bench_profile_step --kernels: kernel names into classes, the per-class figures against the
memory roofline (the gap to the roofline split exactly), the top kernels, and the decode steps
it profiles, run on a tiny CPU engine (the kernels themselves need the GPU)."""

from __future__ import annotations

import sys

import pytest

from bench.common.roofline import HBM_BYTES_PER_S, kv_bytes_per_token, weight_bytes
from bench.common.tiny_model import tiny_qwen3
from bench.profiling import profile_kernels
from bench.profiling.kernel_classes import (
    ATTENTION,
    ELEMENTWISE,
    GEMM,
    MEMORY,
    OTHER,
    SAMPLING,
    Kernel,
    StepProfile,
    busy_us,
    class_table,
    kernel_class,
    step_table,
    top_table,
)
from bench.suites.bench_profile_step import main as profile_step_main
from vigil.devtools.model_shapes import SHAPES

NAMES = {
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_NNT": GEMM,
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas": GEMM,
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_64x64_32x6_tn_align8>": GEMM,
    "void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>": GEMM,
    "_gemv_body": GEMM,
    "_decode_kernel": ATTENTION,
    "_merge_kernel": ATTENTION,
    "_prefill_kernel": ATTENTION,
    "_chunk_kernel": SAMPLING,
    "_fold_kernel": SAMPLING,
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>": SAMPLING,
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, ArgMaxOps<float>>>": (
        SAMPLING
    ),
    "_rms_norm_kernel": ELEMENTWISE,
    "_qkv_rope_cache_kernel": ELEMENTWISE,
    "_silu_mul_kernel": ELEMENTWISE,
    "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>": ELEMENTWISE,
    "void at::native::index_elementwise_kernel<128, 4>": ELEMENTWISE,
    "Memcpy HtoD (Pinned -> Device)": MEMORY,
    "Memset (Device)": MEMORY,
    "some_kernel_nobody_named": OTHER,
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_kernel_names_fall_into_their_class(name):
    assert kernel_class(name) == NAMES[name]


def test_busy_time_counts_overlapping_kernels_once():
    ks = [Kernel("a", 0, 10), Kernel("b", 5, 15), Kernel("c", 20, 25), Kernel("d", 21, 22)]
    assert busy_us(ks) == 20
    assert busy_us([]) == 0


SHAPE = SHAPES["qwen3-4b"]
BATCH, STEPS, CONTEXT = 64, 2, 384


def _profile(wall_ms: float) -> StepProfile:
    """Two steps: the GEMMs at half of 4.8 TB/s, the attention at the full rate, a norm, a
    sampler kernel overlapping it by 10 us, and one unknown kernel."""
    gemm_us = 1e6 * weight_bytes(SHAPE) / (HBM_BYTES_PER_S / 2)
    kv_us = 1e6 * BATCH * CONTEXT * kv_bytes_per_token(SHAPE) / HBM_BYTES_PER_S
    kernels, t = [], 0.0
    for _ in range(STEPS):
        for name, us in (
            ("nvjet_tst_gemm", gemm_us),
            ("_decode_kernel", kv_us),
            ("_rms_norm_kernel", 40.0),
            ("x" * 100, 30.0),
        ):
            kernels.append(Kernel(name, t, t + us))
            t += us
        kernels.append(Kernel("_chunk_kernel", t - 10, t + 10))  # overlaps the last one
        t += 10 + 50  # then 50 us idle
    return StepProfile("qwen3-4b", SHAPE, BATCH, STEPS, CONTEXT, wall_ms, kernels)


def _rows(table) -> dict[str, list[str]]:
    return {row[0]: row for row in table.rows}


def test_the_class_table_splits_the_gap_to_the_roofline():
    p = _profile(wall_ms=0)
    p.wall_ms = p.busy_ms() + 0.05  # the 50 us idle per step
    rows = _rows(class_table(p))
    assert rows[GEMM][5] == "50.0 %" and rows[ATTENTION][5] == "100.0 %"
    assert rows[ELEMENTWISE][1] == "0.040" and rows[OTHER][1] == "0.030"
    assert rows[SAMPLING][1] == "0.020" and rows[MEMORY][1] == "0.000"
    assert rows["kernel overlap (busy - kernel sum)"][7] == "-0.010"
    assert rows["GPU idle (step wall - busy)"][7] == "0.050"
    gap = p.wall_ms - p.roofline_ms()
    parts = [float(row[7]) for name, row in rows.items() if name != "step (wall)"]
    assert sum(parts) == pytest.approx(gap, abs=0.01)
    assert float(rows["step (wall)"][7]) == pytest.approx(gap, abs=1e-3)
    shares = [float(row[8].split()[0]) for name, row in rows.items() if name != "step (wall)"]
    assert sum(shares) == pytest.approx(100, abs=0.5)
    assert float(rows[ATTENTION][8].split()[0]) == pytest.approx(0, abs=0.05)  # at the roofline


def test_the_step_and_top_tables():
    p = _profile(wall_ms=0)
    p.wall_ms = 2 * p.roofline_ms()
    step = step_table([p]).rows[0]
    assert step[6] == "50.0 %"
    assert float(step[4]) == pytest.approx(1e3 * BATCH / p.wall_ms, rel=1e-3)
    assert float(step[9]) == pytest.approx(p.wall_ms - p.busy_ms(), abs=1e-3)
    top = top_table(p, n=3, width=20)
    assert [r[1] for r in top.rows] == [GEMM, ATTENTION, ELEMENTWISE]
    assert all(r[2] == "1.0" for r in top.rows)  # one launch per step each
    long = top_table(p, n=10, width=20).rows[3]
    assert long[0] == "`" + "x" * 17 + "...`" and long[1] == OTHER


TINY = tiny_qwen3()


def test_profile_batch_runs_its_steps_at_the_context_and_leaves_the_engine_empty(monkeypatch):
    from bench.common.hf_random import hf_random_model, loaded_from_hf, make_engine

    loaded = loaded_from_hf(hf_random_model(TINY, device="cpu"), TINY, "tiny")
    engine = make_engine(
        loaded, max_num_seqs=8, kv_tokens=profile_kernels.kv_tokens_needed(8, 96, 4), device="cpu"
    )
    fake = [Kernel("_decode_kernel", 0.0, 5.0)]
    monkeypatch.setattr(profile_kernels, "kernels_from", lambda prof: fake)
    for batch in (8, 3):  # one engine, one batch after the other
        p = profile_kernels.profile_batch(engine, "tiny", TINY, batch, steps=4, context=96)
        assert p.batch == batch and p.steps == 4 and p.kernels == fake
        assert abs(p.mean_context - 96) <= 2
        assert p.wall_ms > 0
        assert not engine.requests and not engine.scheduler.running


def test_several_batches_need_kernels_and_kernels_need_the_gpu(monkeypatch):
    for argv in (["--batch", "64,256"], ["--kernels", "--device", "cpu"]):
        monkeypatch.setattr(sys, "argv", ["bench_profile_step", *argv])
        with pytest.raises(SystemExit) as exc:
            profile_step_main()
        assert exc.value.code == 2
