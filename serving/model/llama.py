"""The Llama-family decoder (Llama, SmolLM2, Qwen2 with qkv bias, Qwen3 with q/k RMSNorm; GQA;
tied embeddings) over flattened step tokens, plus loading from an HF-named state dict.

`forward` takes the step's token ids and positions (all sequences concatenated), the per-layer
paged KV caches and the step's `AttentionMetadata`; it returns hidden states for every token.
`compute_logits` is applied only to the rows that need a sample.
"""

from __future__ import annotations

import torch
from torch import nn

from serving.attention.base import AttentionBackend, AttentionMetadata
from serving.attention.layer_spec import kv_groups, layer_slots
from serving.distributed.context import ParallelContext
from serving.distributed.partition import vocab_shard_size
from serving.loader.config import ModelConfig
from serving.loader.moe_config import MoEConfig
from serving.model.gemma import build_gemma
from serving.model.layers import DecoderLayer, RMSNorm
from serving.model.moe import SparseMoeBlock
from serving.model.moe_weights import moe_state_dict
from serving.model.parallel_layers import (
    ColumnParallelLinear,
    VocabParallelEmbedding,
    gather_logits,
)
from serving.model.rope import RotaryEmbedding

GEMMA_ARCHS = ("gemma3_text", "gemma4_text")

SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3", "mistral", "qwen3_moe", "gpt_oss")


class LlamaForCausalLM(nn.Module):
    def __init__(
        self,
        config: ModelConfig,
        qkv_bias: bool = False,
        o_bias: bool = False,
        tp: ParallelContext | None = None,
    ):
        super().__init__()
        if config.arch not in SUPPORTED_ARCHS:
            raise ValueError(
                f"unsupported architecture {config.arch!r}; expected one of {SUPPORTED_ARCHS}"
            )
        self.config = config
        # tensor parallel only past one rank: world size 1 builds the plain single-device modules
        self.tp = tp if tp is not None and tp.world_size > 1 else None
        self.embed_tokens: nn.Embedding | VocabParallelEmbedding
        self.lm_head: nn.Linear | ColumnParallelLinear
        if self.tp is None:
            self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        else:
            self.embed_tokens = VocabParallelEmbedding(
                config.vocab_size, config.hidden_size, self.tp
            )
        specs = config.layers()
        self.layers = nn.ModuleList(
            DecoderLayer(config, qkv_bias, o_bias, self.tp, spec) for spec in specs
        )
        if len({(s.rope, s.head_dim) for s in specs}) > 1:
            raise ValueError(f"{config.arch}: one rope and head_dim for all layers expected")
        groups = kv_groups(specs)
        self.num_kv_groups = len(groups)
        self.layer_group = [g for g, _ in layer_slots(specs, groups)]
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary = RotaryEmbedding(config, specs[0])
        self.tie_word_embeddings = bool(config.tie_word_embeddings)
        if not self.tie_word_embeddings and self.tp is None:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        elif not self.tie_word_embeddings and self.tp is not None:
            rows = vocab_shard_size(config.vocab_size, self.tp.world_size)
            self.lm_head = ColumnParallelLinear(config.hidden_size, rows, bias=False)

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.tie_word_embeddings else self.lm_head.weight

    def forward(
        self,
        input_ids: torch.Tensor,  # int64 [num_tokens]
        positions: torch.Tensor,  # int64 [num_tokens]
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        meta: AttentionMetadata,
        backend: AttentionBackend,
    ) -> torch.Tensor:
        hidden = self.embed_tokens(input_ids)
        cos, sin = self.rotary.cos_sin(positions, hidden.dtype)
        metas = meta.for_groups(self.num_kv_groups)
        for layer, kv, g in zip(self.layers, kv_caches, self.layer_group, strict=True):
            hidden = layer(hidden, cos, sin, kv, metas[g], backend)
        return self.norm(hidden)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        # float32 logits whatever the weight dtype: the sampler's softmax/logprobs need them
        if self.tp is not None:  # a collective: every rank must call it with the same rows
            local = torch.nn.functional.linear(hidden, self.lm_head_weight)
            return gather_logits(local, self.config.vocab_size, self.tp).float()
        return torch.nn.functional.linear(hidden, self.lm_head_weight).float()


def _fused_state_dict(
    config: ModelConfig, sd: dict[str, torch.Tensor], o_bias: bool
) -> dict[str, torch.Tensor]:
    """Map HF Llama names onto this module's (q/k/v and gate/up concatenated)."""
    missing: list[str] = []

    def take(name: str) -> torch.Tensor:
        if name not in sd:
            missing.append(name)
            return torch.empty(0)
        return sd[name]

    moe = getattr(config, "moe", None)
    out = {
        "embed_tokens.weight": take("model.embed_tokens.weight"),
        "norm.weight": take("model.norm.weight"),
    }
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = take("lm_head.weight")
    for i in range(config.num_hidden_layers):
        p, q = f"model.layers.{i}.", f"layers.{i}."
        attn = p + "self_attn."
        out[q + "self_attn.qkv_proj.weight"] = torch.cat(
            [take(attn + f"{x}_proj.weight") for x in "qkv"], dim=0
        )
        if attn + "q_proj.bias" in sd:
            out[q + "self_attn.qkv_proj.bias"] = torch.cat(
                [take(attn + f"{x}_proj.bias") for x in "qkv"]
            )
        out[q + "self_attn.o_proj.weight"] = take(attn + "o_proj.weight")
        if o_bias:
            out[q + "self_attn.o_proj.bias"] = take(attn + "o_proj.bias")
        if getattr(config, "attention_sinks", False):
            out[q + "self_attn.sinks"] = take(attn + "sinks")
        if getattr(config, "qk_norm", False):
            out[q + "self_attn.q_norm.weight"] = take(attn + "q_norm.weight")
            out[q + "self_attn.k_norm.weight"] = take(attn + "k_norm.weight")
        if moe is None or not moe.is_sparse(i):
            out[q + "mlp.gate_up_proj.weight"] = torch.cat(
                [take(p + "mlp.gate_proj.weight"), take(p + "mlp.up_proj.weight")], dim=0
            )
            out[q + "mlp.down_proj.weight"] = take(p + "mlp.down_proj.weight")
        out[q + "input_layernorm.weight"] = take(p + "input_layernorm.weight")
        out[q + "post_attention_layernorm.weight"] = take(p + "post_attention_layernorm.weight")
    out.update(moe_state_dict(config, sd, take))
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        )
        raise ValueError(f"model weights are missing tensors: {shown}")
    return out


def build_model(
    config: ModelConfig,
    state_dict: dict[str, torch.Tensor],
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    tp: ParallelContext | None = None,
) -> nn.Module:
    """Build the model for `config` and load an HF-named state dict into it (shapes checked).
    With `tp` (world size > 1) the state dict holds this rank's shard (serving/loader/shard.py).
    Gemma families: serving/model/gemma.py (one device)."""
    if config.arch in GEMMA_ARCHS:
        if tp is not None and tp.world_size > 1:
            raise ValueError(f"{config.arch}: tensor parallelism is not supported")
        return build_gemma(config, state_dict, device, dtype)
    qkv_bias = "model.layers.0.self_attn.q_proj.bias" in state_dict
    o_bias = "model.layers.0.self_attn.o_proj.bias" in state_dict
    moe: MoEConfig | None = getattr(config, "moe", None)
    if moe is not None and tp is not None and tp.world_size > 1:
        raise ValueError("tensor parallelism is not supported for mixture-of-experts models")
    with torch.device("meta"):
        model = LlamaForCausalLM(config, qkv_bias=qkv_bias, o_bias=o_bias, tp=tp)
        if moe is not None:  # experts where the MLP stood
            for i in moe.sparse_layers:
                model.layers[i].mlp = SparseMoeBlock(config.hidden_size, moe, i)
    fused = _fused_state_dict(config, state_dict, o_bias)
    expected = dict(model.named_parameters())
    for name, param in expected.items():
        if tuple(fused[name].shape) != tuple(param.shape):
            raise ValueError(
                f"weight {name} has shape {tuple(fused[name].shape)}, the config implies "
                f"{tuple(param.shape)}"
            )
    tensors = {k: v.to(device=device, dtype=dtype).contiguous() for k, v in fused.items()}
    model.load_state_dict(tensors, strict=True, assign=True)
    model.rotary = RotaryEmbedding(config, config.layers()[0]).to(
        device
    )  # buffers were created on meta
    return model.eval()
