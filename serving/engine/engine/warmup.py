"""A dummy burst through the engine at start-up, then a clean slate.

Triton compiles a kernel variant the first time it meets a new specialisation: a prefill tile
height, a token count of another alignment class (1, a multiple of 16, other), a block-table
width of another class. On a fresh GPU machine each compile takes a few hundred milliseconds
inside a step, and a burst of new users waited for them (TTFT ~550 ms for 64 short prompts on
a datacenter GPU, ~80 ms once warm). The warm-up runs, with CUDA graphs off (their captures compiled
what they replay), prompts of lengths that cover those classes, as one batch and as decodes, a
few alone (one sequence per step, a prefix-cache hit), and runs the attention kernels once per
split count and prefill tile on dummy rows (a step that falls back to eager runs the decode
kernel with a split count chosen per step). Then `LLMEngine.reset()` gives the engine a fresh
block manager, scheduler and counters, so no metric and no prefix-cache entry remembers it.

Whoever builds an engine runs it (`build_engine`): the engine itself never calls it.
"""

from __future__ import annotations

from serving.engine.engine.llm_engine import LLMEngine
from serving.engine.worker.kernel_warmup import compile_attention_variants, load_gemm_kernels
from serving.sampling_params import SamplingParams

MAX_SEQS = 64
# 1 and 16: the specialised token counts; 7, 17, 33: others; 64+: the tall prefill tile
LENGTHS = (1, 7, 16, 17, 33, 64, 300)
# (length, first token id): the second 64 repeats the first and finds its blocks in the prefix
# cache; 520 and 528, sharing no block with the others, run the lone-prompt path in both
# token-count classes
ALONE = ((1, 0), (17, 0), (64, 0), (64, 0), (520, 100), (528, 200))
REQUEST_PREFIX = "__vigil_warmup-"


def wants_warm_up(engine: LLMEngine[object]) -> bool:
    """The configuration asks for it and the engine runs its model in this process, on CUDA."""
    return (
        engine.config.warm_up_at_start
        and engine.device.type == "cuda"
        and engine.local_runner is not None
    )


def warm_up(engine: LLMEngine[object]) -> int:
    """Run the warm-up burst; returns the number of engine steps it took."""
    if engine.has_unfinished_requests():
        raise RuntimeError("warm-up runs before the engine takes requests")
    cfg = engine.config
    longest = max(1, engine.max_model_len - 2)
    lengths = [min(n, longest) for n in LENGTHS]
    vocab = min(engine.model_config.vocab_size, 1000)
    params = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
    runner = engine.local_runner
    gpu = runner.gpu if runner is not None else None
    graphs_on = gpu is not None and gpu.use_graphs
    if gpu is not None and graphs_on:  # their captures compiled what they replay: eager steps
        gpu.use_graphs = False
    try:
        steps = _warm_up_requests(engine, lengths, longest, vocab, params)
    finally:
        if gpu is not None and graphs_on:
            gpu.use_graphs = True
    if runner is not None and gpu is not None:
        compile_attention_variants(runner)
        load_gemm_kernels(runner.model, cfg.max_num_batched_tokens, cfg.max_num_seqs)
    engine.reset()
    return steps


def _warm_up_requests(
    engine: LLMEngine[object], lengths: list[int], longest: int, vocab: int, params: SamplingParams
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


def _run_to_end(engine: LLMEngine[object]) -> int:
    steps = 0
    while engine.has_unfinished_requests():
        engine.step()
        steps += 1
    return steps
