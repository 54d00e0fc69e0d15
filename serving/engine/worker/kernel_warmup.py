"""The kernels a step may launch, run once on dummy inputs before users arrive (the engine's
warm-up, serving/engine/engine/warmup.py, calls these after its request burst)."""

from __future__ import annotations

from typing import Any

import torch

from serving.engine.worker.causal_lm import CausalLM
from serving.engine.worker.runner import ModelRunner


@torch.inference_mode()
def compile_attention_variants(runner: ModelRunner) -> None:
    """Every decode split count and both prefill tiles, on one dummy sequence over block 0 (read,
    never written) of layer 0's cache; the outputs are thrown away."""
    from serving.kernels.paged_decode import MAX_SPLITS, paged_decode
    from serving.kernels.paged_prefill import paged_prefill

    k_cache, v_cache = runner.kv_caches[0]
    cfg, dev = runner.config, runner.device
    dtype = next(runner.model.parameters()).dtype
    backend: Any = runner.backend  # the Triton backend, the only one with these kernels
    scales = {"k_scale": backend.k_scale, "v_scale": backend.v_scale}
    attn = runner.model.layers[0].self_attn
    scales["window"] = getattr(attn, "sliding_window", None)
    sinks = getattr(attn, "sinks", None)
    if sinks is not None and sinks.shape[0] == cfg.num_attention_heads:  # gpt-oss's variants
        scales["sinks"] = sinks
    for rows in (1, 17):  # prefill tiles of 16 and of 64 rows
        query = torch.zeros((rows, cfg.num_attention_heads, cfg.head_dim), dtype=dtype, device=dev)
        width = -(-rows // runner.block_size)
        tables = torch.zeros((1, width), dtype=torch.int32, device=dev)
        seq_lens = torch.tensor([rows], dtype=torch.int32, device=dev)
        starts = torch.tensor([0, rows], dtype=torch.int32, device=dev)
        out = torch.empty_like(query)
        paged_prefill(query, k_cache, v_cache, tables, seq_lens, starts, out, 1.0, rows, **scales)
        if rows == 1:
            splits = 1
            while splits <= MAX_SPLITS:
                paged_decode(
                    query,
                    k_cache,
                    v_cache,
                    tables,
                    seq_lens,
                    starts,
                    out,
                    1.0,
                    1,
                    num_splits=splits,
                    **scales,
                )
                splits *= 2
    torch.cuda.synchronize(dev)


@torch.inference_mode()
def load_gemm_kernels(model: CausalLM, max_tokens: int, max_rows: int) -> None:
    """Every layer GEMM at every row count a step can have, and the LM head at every sampled-row
    count. cuBLAS picks a kernel per shape and CUDA loads a kernel's module on its first launch:
    a step with a row count never seen before took ~30 ms longer on a datacenter GPU (a
    64-prompt burst waited ~100 ms on its first step)."""
    # one (weight, bias) per weight shape, dtype and bias
    layers: dict[tuple, tuple[torch.Tensor, torch.Tensor | None]] = {}
    for module in model.modules():
        weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
        if (
            isinstance(weight, torch.Tensor)
            and weight.dim() == 2
            and not isinstance(module, torch.nn.Embedding)
        ):
            key = (tuple(weight.shape), weight.dtype, bias is not None)
            layers.setdefault(key, (weight, bias))
    for weight, bias in layers.values():
        x = torch.randn((max_tokens, weight.shape[1]), dtype=weight.dtype, device=weight.device)
        for rows in range(1, max_tokens + 1):
            torch.nn.functional.linear(x[:rows], weight, bias)
        del x
    hidden = torch.zeros(
        (max_rows, model.config.hidden_size),
        dtype=next(model.parameters()).dtype,
        device=next(model.parameters()).device,
    )
    for rows in range(1, max_rows + 1):
        model.compute_logits(hidden[:rows])
    torch.cuda.synchronize()
