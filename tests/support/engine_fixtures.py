"""Helpers for engine tests: tiny random-weight Llama/Qwen2/Qwen3 models saved the real way
(transformers `save_pretrained` -> safetensors + config.json, plus a byte-level tokenizer.json) and
loaded through our loader; and a driver that runs an engine to completion."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers.pre_tokenizers import ByteLevel

from serving.engine import EngineConfig, LLMEngine
from serving.sampling_params import SamplingParams

VOCAB = 256


def byte_tokenizer_json(path: Path) -> None:
    """A 256-token byte-level BPE (no merges): every byte is one token, ids 0..255."""
    alphabet = sorted(ByteLevel.alphabet(), key=lambda ch: _byte_of(ch))
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(path / "tokenizer.json"))


def _byte_of(ch: str) -> int:
    # GPT-2's byte -> printable char map, inverted
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip([chr(c) for c in cs], bs, strict=True))[ch]


TINY_WINDOW = 8  # sliding window of the tiny Mistral / Gemma checkpoints (prompts run longer)
# per family: the config keywords beyond the shared tiny shape
TINY_EXTRA: dict[str, dict] = {
    "qwen3": {"head_dim": 16},
    "mistral": {"head_dim": 16, "sliding_window": TINY_WINDOW},
    "gemma3_text": {
        "head_dim": 16,
        "num_hidden_layers": 3,
        "sliding_window": TINY_WINDOW,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        "query_pre_attn_scalar": 24,
        "final_logit_softcapping": 3.0,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
        },
    },
    "gemma4_text": {
        "head_dim": 16,
        "num_hidden_layers": 4,
        "sliding_window": TINY_WINDOW,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "global_head_dim": 32,
        "num_global_key_value_heads": 1,
        "attention_k_eq_v": True,
        "hidden_size_per_layer_input": 8,
        "vocab_size_per_layer_input": VOCAB,
        "final_logit_softcapping": 3.0,
    },
}


def save_tiny_model(arch: str, path: Path, seed: int = 0, **overrides):
    """Random weights (std 0.2: peaked logits, so greedy argmax has no numerical near-ties)."""
    import transformers as tf

    if arch in ("gemma3_text", "gemma4_text"):
        cfg_cls = tf.Gemma3TextConfig if arch == "gemma3_text" else tf.Gemma4TextConfig
        cls = (cfg_cls, tf.AutoModelForCausalLM.from_config)
    else:
        cls = {
            "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
            "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
            "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM),
            "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
        }[arch]
    kwargs = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.2,
        tie_word_embeddings=arch == "llama" or arch.startswith("gemma"),
        rope_theta=10000.0,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    kwargs.update(TINY_EXTRA.get(arch, {}))
    kwargs.update(overrides)
    if arch.startswith("gemma"):
        kwargs.pop("rope_theta")
    config = cls[0](**kwargs)
    torch.manual_seed(seed)
    model = cls[1](config).eval()
    with torch.no_grad():  # norms start at 1.0; randomize them so they are tested too
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.copy_(
                    1.0 + 0.3 * torch.randn_like(p) if "norm" in name else 0.3 * torch.randn_like(p)
                )
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand_like(b))
    model.save_pretrained(str(path))
    byte_tokenizer_json(path)
    return model


def make_engine(loaded, **overrides) -> LLMEngine:
    cfg = dict(
        device="cpu", block_size=4, num_kv_blocks=256, max_num_batched_tokens=64, max_num_seqs=16
    )
    cfg.update(overrides)
    return LLMEngine(EngineConfig(**cfg), loaded=loaded)


def greedy(max_tokens: int = 16, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **kw)


def run_to_completion(
    engine: LLMEngine, arrivals: dict[int, list[tuple[str, list[int], SamplingParams]]]
):
    """`arrivals[step]`: requests added before that step. Returns {request_id: final output}."""
    finals = {}
    step = 0
    pending = dict(arrivals)
    while pending or engine.has_unfinished_requests():
        for rid, ids, params in pending.pop(step, []):
            engine.add_request(rid, ids, params)
        for out in engine.step():
            if out.finished:
                finals[out.request_id] = out
        step += 1
        assert step < 10_000, "engine did not finish"
    return finals


def record_launches_and_reads(monkeypatch, runner_cls) -> list[str]:
    """Spy on `runner_cls.launch` and `InflightStep.results`: the returned list fills with
    "launch" and "read" in the order the engine calls them."""
    from serving.engine.worker.runner import InflightStep

    events: list[str] = []
    real_launch, real_results = runner_cls.launch, InflightStep.results

    def launch(self, *a, **kw):
        events.append("launch")
        return real_launch(self, *a, **kw)

    def results(self):
        events.append("read")
        return real_results(self)

    monkeypatch.setattr(runner_cls, "launch", launch)
    monkeypatch.setattr(InflightStep, "results", results)
    return events
