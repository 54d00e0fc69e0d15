"""HF expert tensors -> the stacked parameters of `SparseMoeBlock` (serving/model/moe.py).

Qwen3-MoE checkpoints hold one tensor per expert and projection
(`mlp.experts.{e}.{gate,up,down}_proj.weight`, [I, H] / [H, I]) and the router as
`mlp.gate.weight` [E, H]; they are stacked into w13 [E, 2I, H] (gate rows, then up rows) and
w2 [E, H, I]. gpt-oss stores them transposed for `x @ W` with gate and up columns interleaved
(`mlp.experts.gate_up_proj` [E, H, 2I], even columns gate, odd up; its bias [E, 2I] alike;
`mlp.experts.down_proj` [E, I, H]) and the router with a bias (`mlp.router.weight`/`.bias`): they
are de-interleaved and transposed once at load. Qwen3-MoE's in-memory layout in transformers (a
model's `state_dict()`) is already stacked as w13/w2 (`mlp.experts.gate_up_proj`,
`mlp.experts.down_proj`) and is taken as it is, without a copy.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from serving.loader.config import ModelConfig
from serving.loader.moe_config import MoEConfig

Take = Callable[[str], torch.Tensor]  # a named tensor of the state dict (empty when missing)


def moe_state_dict(
    config: ModelConfig, sd: dict[str, torch.Tensor], take: Take
) -> dict[str, torch.Tensor]:
    """This module's names for every sparse layer's router and experts; `take(name)` reads a
    tensor of `sd` (recording a missing one)."""
    moe: MoEConfig | None = getattr(config, "moe", None)
    out: dict[str, torch.Tensor] = {}
    if moe is None:
        return out
    for i in moe.sparse_layers:
        p, q = f"model.layers.{i}.mlp.", f"layers.{i}.mlp."
        experts = range(moe.num_experts)
        if moe.expert_layout == "interleaved_transposed":
            out.update(_gpt_oss_experts(p, q, take))
            continue
        out[q + "router.weight"] = take(p + "gate.weight")
        if p + "experts.gate_up_proj" in sd:
            out[q + "w13"] = take(p + "experts.gate_up_proj")
            out[q + "w2"] = take(p + "experts.down_proj")
            continue
        gate = [take(f"{p}experts.{e}.gate_proj.weight") for e in experts]
        up = [take(f"{p}experts.{e}.up_proj.weight") for e in experts]
        down = [take(f"{p}experts.{e}.down_proj.weight") for e in experts]
        if any(t.numel() == 0 for t in gate + up + down):
            continue  # `take` recorded what is missing
        out[q + "w13"] = torch.cat([torch.stack(gate), torch.stack(up)], dim=1)
        out[q + "w2"] = torch.stack(down)
    return out


def _gpt_oss_experts(p: str, q: str, take: Take) -> dict[str, torch.Tensor]:
    gate_up, gate_up_bias = take(p + "experts.gate_up_proj"), take(p + "experts.gate_up_proj_bias")
    down, down_bias = take(p + "experts.down_proj"), take(p + "experts.down_proj_bias")
    out = {q + "router." + x: take(p + "router." + x) for x in ("weight", "bias")}
    if gate_up.dim() != 3 or down.dim() != 3 or gate_up_bias.dim() != 2:
        return out  # missing (recorded by `take`) or of the wrong rank (the shape check names it)
    w13 = torch.cat([gate_up[..., 0::2], gate_up[..., 1::2]], dim=-1)  # [E, H, 2I], gate | up
    out[q + "w13"] = w13.transpose(1, 2).contiguous()
    out[q + "b13"] = torch.cat([gate_up_bias[:, 0::2], gate_up_bias[:, 1::2]], dim=-1)
    out[q + "w2"] = down.transpose(1, 2).contiguous()
    out[q + "b2"] = down_bias
    return out
