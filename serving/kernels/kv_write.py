"""reshape_and_cache: write this step's new K/V rows into their paged-cache slots (optionally FP8).

One program per token: it reads the token's [num_kv_heads * head_dim] key and value (contiguous
within the token) and stores them at `slot * num_kv_heads * head_dim` of the flattened cache.
A slot of -1 means "do not write" (padding, or a token whose KV already sits in the cache).
FP8 (e4m3) caches hold `x / scale`, saturated to the format's +-448.
"""

import torch

from serving.kernels._compat import require_triton, tl, triton

FP8_E4M3_MAX = 448.0


@triton.jit
def _write_kv_kernel(  # type: ignore[no-untyped-def]  # Triton kernel
    key_ptr,
    value_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_ptr,
    key_stride,
    value_stride,
    k_inv_scale,
    v_inv_scale,
    HD: tl.constexpr,
    BLOCK: tl.constexpr,
    FP8: tl.constexpr,
):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    if slot < 0:
        return
    offs = tl.arange(0, BLOCK)
    mask = offs < HD
    k = tl.load(key_ptr + t.to(tl.int64) * key_stride + offs, mask=mask)
    v = tl.load(value_ptr + t.to(tl.int64) * value_stride + offs, mask=mask)
    if FP8:
        kf = k.to(tl.float32) * k_inv_scale
        vf = v.to(tl.float32) * v_inv_scale
        kf = tl.minimum(tl.maximum(kf, -448.0), 448.0)
        vf = tl.minimum(tl.maximum(vf, -448.0), 448.0)
        k = kf.to(k_cache_ptr.dtype.element_ty)
        v = vf.to(v_cache_ptr.dtype.element_ty)
    tl.store(k_cache_ptr + slot * HD + offs, k, mask=mask)
    tl.store(v_cache_ptr + slot * HD + offs, v, mask=mask)


def _token_rows(x: torch.Tensor, name: str) -> torch.Tensor:
    """[T, H, D] with each token's H*D elements contiguous (a view of a fused qkv is fine)."""
    if x.dim() != 3:
        raise ValueError(
            f"{name} must be [num_tokens, num_kv_heads, head_dim], got {tuple(x.shape)}"
        )
    if x.stride(2) != 1 or x.stride(1) != x.shape[2]:
        x = x.contiguous()
    return x


def write_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
) -> None:
    """Scatter key/value [T, Hkv, D] into caches [num_blocks, block_size, Hkv, D] at
    slot_mapping."""
    require_triton()
    key = _token_rows(key, "key")
    value = _token_rows(value, "value")
    num_tokens, num_kv_heads, head_dim = key.shape
    if k_cache.shape[-2:] != (num_kv_heads, head_dim) or not k_cache.is_contiguous():
        raise ValueError(
            f"k_cache must be contiguous [num_blocks, block_size, {num_kv_heads}, {head_dim}], "
            f"got {tuple(k_cache.shape)}"
        )
    if slot_mapping.shape[0] < num_tokens:
        raise ValueError("slot_mapping has fewer entries than key has tokens")
    if num_tokens == 0:
        return
    hd = num_kv_heads * head_dim
    fp8 = k_cache.dtype == torch.float8_e4m3fn
    _write_kv_kernel[(num_tokens,)](
        key,
        value,
        k_cache,
        v_cache,
        slot_mapping,
        key.stride(0),
        value.stride(0),
        1.0 / k_scale,
        1.0 / v_scale,
        HD=hd,
        BLOCK=triton.next_power_of_2(hd),
        FP8=fp8,
        num_warps=4 if hd >= 1024 else 2,
    )
