"""Triton GPU kernels for the serving engine.

Every module here imports without Triton (CPU CI has none): `HAS_TRITON` says whether the kernels
can run, and calling one where Triton is absent raises a clear RuntimeError. The public entry
points are the Python wrappers:

- `serving.kernels.kv_write.write_kv(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale)`
- `serving.kernels.paged_decode.paged_decode(...)`  (one query token per sequence, split-K; the
  splits merged by `split_merge`)
- `serving.kernels.paged_prefill.paged_prefill(...)`  (varlen/chunked prefill over the paged cache)
  (both: sliding windows, soft-caps, gpt-oss's attention sinks, head dims up to 512)
- `serving.kernels.fused_ops.rms_norm / silu_and_mul / rotary_inplace`
- `serving.kernels.qkv_rope_cache.qkv_rope_cache(...)`  (q/k norm + rotary + KV write, one kernel)
- `serving.kernels.fused_forward.fused_forward(model, ids, positions, kv_caches, meta, backend)`
- `serving.kernels.gemv.gemv / gemv_silu / gemv_rms_norm`  (one decode token; configurations chosen
  by `serving.kernels.gemv_tuning`)
- `serving.kernels.skinny_gemm.skinny_linear`  (2-64 decode rows; timed per shape against cuBLAS,
  which it keeps where faster)
- `serving.kernels.linear.linear`  (what the model's projections call: GEMV, skinny GEMM or cuBLAS)
- `serving.kernels.logit_stats.logit_stats(logits)`  (the sampler's lse, entropy and argmax per row)
- `serving.kernels.moe_gemm.fused_experts(x, w13, w2, ids, weights, act, b13, b2)`  (a mixture of
  experts' experts: grouped GEMMs over the pairs sorted by expert, `moe_align`; its torch oracle
  and CPU path is `moe_reference.experts_reference`)
- `serving.kernels.sm_count.sm_count(device)`  (the device's SM count, which a grid fills)
"""

from serving.kernels._compat import HAS_TRITON

__all__ = ["HAS_TRITON"]
