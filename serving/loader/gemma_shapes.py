"""The tensors of a Gemma 3 / 4 text checkpoint, named as HF names them, with their shapes: what
the loader expects of such a checkpoint (serving/model/gemma.py builds the model from them)."""

from __future__ import annotations

from serving.loader.config import ModelConfig


def gemma_tensor_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every HF tensor of a Gemma 3 / 4 text checkpoint, with its shape."""
    h, gemma4 = config.hidden_size, config.arch == "gemma4_text"
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (config.vocab_size, h),
        "model.norm.weight": (h,),
    }
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, h)
    n, ple = config.num_hidden_layers, config.per_layer_input_size if gemma4 else 0
    if ple:
        shapes["model.embed_tokens_per_layer.weight"] = (config.per_layer_vocab_size, n * ple)
        shapes["model.per_layer_model_projection.weight"] = (n * ple, h)
        shapes["model.per_layer_projection_norm.weight"] = (ple,)
    for i, spec in enumerate(config.layers()):
        p = f"model.layers.{i}."
        q, kv = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
        inter = config.intermediate_size * (2 if i in config.double_wide_mlp_layers else 1)
        shapes[p + "self_attn.q_proj.weight"] = (q, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, q)
        shapes[p + "self_attn.q_norm.weight"] = (spec.head_dim,)
        if spec.kv_source is None:
            shapes[p + "self_attn.k_proj.weight"] = (kv, h)
            shapes[p + "self_attn.k_norm.weight"] = (spec.head_dim,)
            if not (gemma4 and config.k_eq_v and spec.sliding_window is None):
                shapes[p + "self_attn.v_proj.weight"] = (kv, h)
        for proj, shape in (("gate", (inter, h)), ("up", (inter, h)), ("down", (h, inter))):
            shapes[p + f"mlp.{proj}_proj.weight"] = shape
        for norm in ("input", "post_attention", "pre_feedforward", "post_feedforward"):
            shapes[p + f"{norm}_layernorm.weight"] = (h,)
        if gemma4:
            shapes[p + "layer_scalar"] = (1,)
        if ple:
            shapes[p + "per_layer_input_gate.weight"] = (ple, h)
            shapes[p + "per_layer_projection.weight"] = (h, ple)
            shapes[p + "post_per_layer_input_norm.weight"] = (h,)
    return shapes
