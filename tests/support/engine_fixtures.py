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


def save_tiny_model(arch: str, path: Path, seed: int = 0):
    """Random weights (std 0.2: peaked logits, so greedy argmax has no numerical near-ties)."""
    import transformers as tf

    cls = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM),
    }[arch]
    extra = {"head_dim": 16} if arch == "qwen3" else {}
    config = cls[0](
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.2,
        tie_word_embeddings=arch == "llama",
        rope_theta=10000.0,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **extra,
    )
    torch.manual_seed(seed)
    model = cls[1](config).eval()
    with torch.no_grad():  # norms start at 1.0; randomize them so they are tested too
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.copy_(
                    1.0 + 0.3 * torch.randn_like(p) if "norm" in name else 0.3 * torch.randn_like(p)
                )
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
