"""A dummy burst through the engine at start-up, then a clean slate.

Triton compiles a kernel variant the first time it meets a new specialisation: a prefill tile
height, a token count of another alignment class (1, a multiple of 16, other), a block-table
width of another class. On a fresh GPU machine each compile takes a few hundred milliseconds
inside a step, and a burst of new users waited for them (TTFT ~550 ms for 64 short prompts on
an H200, ~80 ms once warm). The warm-up runs, with CUDA graphs off (their captures compiled
what they replay), prompts of lengths that cover those classes, as one batch and as decodes, a
few alone (one sequence per step, a prefix-cache hit), and runs the attention kernels once per
split count and prefill tile on dummy rows (a step that falls back to eager runs the decode
kernel with a split count chosen per step). Then `LLMEngine.reset()` gives the engine a fresh
block manager, scheduler and counters, so no metric and no prefix-cache entry remembers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from serving.sampling_params import SamplingParams

if TYPE_CHECKING:
    from serving.engine.core.llm_engine import LLMEngine

MAX_SEQS = 64
# 1 and 16: the specialised token counts; 7, 17, 33: others; 64+: the tall prefill tile
LENGTHS = (1, 7, 16, 17, 33, 64, 300)
# (length, first token id): the second 64 repeats the first and finds its blocks in the prefix
# cache; 520 and 528, sharing no block with the others, run the lone-prompt path in both
# token-count classes
ALONE = ((1, 0), (17, 0), (64, 0), (64, 0), (520, 100), (528, 200))
REQUEST_PREFIX = "__vigil_warmup-"


def warm_up(engine: LLMEngine) -> int:
    """Run the warm-up burst; returns the number of engine steps it took."""
    if engine.has_unfinished_requests():
        raise RuntimeError("warm-up runs before the engine takes requests")
    cfg = engine.config
    longest = max(1, engine.max_model_len - 2)
    lengths = [min(n, longest) for n in LENGTHS]
    vocab = min(engine.model_config.vocab_size, 1000)
    params = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
    gpu = engine.runner.gpu
    graphs_on = gpu is not None and gpu.use_graphs
    if graphs_on:  # the graphs compiled their kernels when captured; this is for the eager steps
        gpu.use_graphs = False
    try:
        steps = _warm_up_requests(engine, lengths, longest, vocab, params)
    finally:
        if graphs_on:
            gpu.use_graphs = True
    if gpu is not None:
        compile_attention_variants(engine.runner)
        load_gemm_kernels(engine.runner.model, cfg.max_num_batched_tokens, cfg.max_num_seqs)
    engine.reset()
    return steps


def _warm_up_requests(
    engine: LLMEngine, lengths: list[int], longest: int, vocab: int, params: SamplingParams
) -> int:
    steps = 0
    for i, (n, first) in enumerate(ALONE):
        engine.add_request(
            f"{REQUEST_PREFIX}alone-{i}",
            [(first + j) % vocab for j in range(min(n, longest))],
            params,
        )
        steps += _run_to_end(engine)
    for i in range(min(engine.config.max_num_seqs, MAX_SEQS)):
        n = lengths[i % len(lengths)]
        engine.add_request(f"{REQUEST_PREFIX}{i}", [(i * 31 + j) % vocab for j in range(n)], params)
    return steps + _run_to_end(engine)


def _run_to_end(engine: LLMEngine) -> int:
    steps = 0
    while engine.has_unfinished_requests():
        engine.step()
        steps += 1
    return steps


@torch.inference_mode()
def compile_attention_variants(runner) -> None:
    """Every decode split count and both prefill tiles, on one dummy sequence over block 0 (read,
    never written) of layer 0's cache; the outputs are thrown away."""
    from serving.kernels.paged_decode import MAX_SPLITS, paged_decode
    from serving.kernels.paged_prefill import paged_prefill

    k_cache, v_cache = runner.kv_caches[0]
    cfg, dev = runner.config, runner.device
    dtype = next(runner.model.parameters()).dtype
    scales = {"k_scale": runner.backend.k_scale, "v_scale": runner.backend.v_scale}
    scales["window"] = getattr(runner.model.layers[0].self_attn, "sliding_window", None)
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
def load_gemm_kernels(model: torch.nn.Module, max_tokens: int, max_rows: int) -> None:
    """Every layer GEMM at every row count a step can have, and the LM head at every sampled-row
    count. cuBLAS picks a kernel per shape and CUDA loads a kernel's module on its first launch:
    a step with a row count never seen before took ~30 ms longer on an H200 (a 64-prompt burst
    waited ~100 ms on its first step)."""
    layers: dict[tuple, torch.nn.Module] = {}  # one module per weight shape, dtype and bias
    for module in model.modules():
        weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
        if (
            isinstance(weight, torch.Tensor)
            and weight.dim() == 2
            and not isinstance(module, torch.nn.Embedding)
        ):
            layers.setdefault((tuple(weight.shape), weight.dtype, bias is not None), module)
    for module in layers.values():
        x = torch.randn(
            (max_tokens, module.weight.shape[1]),
            dtype=module.weight.dtype,
            device=module.weight.device,
        )
        for rows in range(1, max_tokens + 1):
            torch.nn.functional.linear(x[:rows], module.weight, module.bias)
        del x
    hidden = torch.zeros(
        (max_rows, model.config.hidden_size),
        dtype=next(model.parameters()).dtype,
        device=next(model.parameters()).device,
    )
    for rows in range(1, max_rows + 1):
        model.compute_logits(hidden[:rows])
    torch.cuda.synchronize()
