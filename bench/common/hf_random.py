"""Random-weight HF transformers models of the benchmarked shapes, and the same weights as our
engine's `LoadedModel` (so engine and HF run the very same model in one process)."""

from __future__ import annotations

import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def hf_random_model(shape: dict, *, seed: int = 0, init_std: float = 0.02, device: str = "cuda"):
    """HF model (bf16, eval) of the config dict, randomly initialised on the device."""
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = {k: v for k, v in shape.items() if k != "model_type"}
    cfg = AutoConfig.for_model(shape["model_type"], initializer_range=init_std, **kw)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = None  # EOS ignored: every run generates its length
    model.generation_config.pad_token_id = 0
    return model.eval()


def loaded_from_hf(hf_model, shape: dict, name: str):
    """Our LoadedModel over the HF model's weights (no tokenizer: token ids in and out)."""
    from serving.loader.config import config_from_hf
    from serving.loader.load import LoadedModel

    config = config_from_hf(dict(shape), {}, name)
    state = {k: v for k, v in hf_model.state_dict().items() if not k.endswith("inv_freq")}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    return LoadedModel(config=config, state_dict=state, tokenizer=None, source=name)


def make_engine(
    loaded,
    *,
    max_num_seqs: int,
    kv_tokens: int,
    kv_cache_dtype: str = "auto",
    device: str = "cuda",
    output=None,
    max_num_batched_tokens: int = 8192,
):
    """`output`: the engine's output sink factory (None: text outputs);
    `max_num_batched_tokens`: the scheduler's token budget per step (prompts are chunked by it)."""
    from serving.engine import build_engine
    from serving.engine.config import EngineConfig
    from serving.engine.worker.runner import kv_bytes_per_block

    kv_dtype = torch.float8_e4m3fn if kv_cache_dtype == "fp8" else torch.bfloat16
    block = 16
    per_block = kv_bytes_per_block(loaded.config, block, kv_dtype)
    num_blocks = -(-kv_tokens // block) + max_num_seqs + 8
    cfg = EngineConfig(
        device=device,
        dtype="bfloat16",
        block_size=block,
        num_kv_blocks=num_blocks,
        kv_cache_memory_mb=max(1, num_blocks * per_block >> 20),
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        enable_prefix_caching=False,
    )
    if kv_cache_dtype != "auto":
        if not hasattr(cfg, "kv_cache_dtype"):
            raise RuntimeError("the engine has no kv_cache_dtype option yet")
        cfg.kv_cache_dtype = kv_cache_dtype
    if output is not None:
        return build_engine(cfg, loaded=loaded, output=output)
    return build_engine(cfg, loaded=loaded)
