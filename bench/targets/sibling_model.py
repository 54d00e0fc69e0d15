"""A sibling of the served model: SmolLM2-135M-Instruct fine-tuned briefly on other answers.

A quiet model swap in production is usually another fine-tune of the same base (a new
checkpoint behind the same name). The sibling here is made the same way, small enough for a
CPU: the shipped model's last `LAYERS` transformer blocks and final norm are trained for
`STEPS` steps of AdamW on BIG-bench baseline-half inputs (rendered with the usual templates)
whose assistant turn is the task's reference answer in a terse house style ("Answer: ...").
The loss covers the assistant turn only. The rest of the weights are shared, as between
fine-tunes of one base. The trained tensors are cached; the engine serves the result.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from bench.workloads.bigbench_tasks import Example
from bench.workloads.drift_quality_pool import draw_prompts

LAYERS = 2
STEPS = 10
BATCH = 4
LR = 3e-4


def _hf_model(loaded):
    from transformers import LlamaConfig, LlamaForCausalLM

    c = loaded.config
    cfg = LlamaConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        rms_norm_eps=c.rms_norm_eps,
        rope_theta=c.rope_theta,
        max_position_embeddings=c.max_position_embeddings,
        tie_word_embeddings=c.tie_word_embeddings,
    )
    model = LlamaForCausalLM(cfg)
    missing, unexpected = model.load_state_dict(loaded.state_dict, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    return model


def _batch(tok, rows: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    seqs, labels = [], []
    for r in rows:
        chat = [{"role": "user", "content": r["prompt"]}]
        head = tok.encode(tok.apply_chat_template(chat, add_generation_prompt=True))
        reply = tok.encode(f"Answer: {r['answer']}.<|im_end|>")
        seqs.append(head + reply)
        labels.append([-100] * len(head) + reply)
    width = max(map(len, seqs))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
    lab = torch.tensor([s + [-100] * (width - len(s)) for s in labels])
    return ids, lab


def trained_tensors(loaded, tasks: dict[str, list[Example]]) -> dict[str, torch.Tensor]:
    """The fine-tuned tensors (HF naming): the last LAYERS blocks and the final norm."""
    torch.manual_seed(0)
    model = _hf_model(loaded)
    first = loaded.config.num_hidden_layers - LAYERS
    trained = [f"model.layers.{i}." for i in range(first, loaded.config.num_hidden_layers)]
    trained.append("model.norm.")
    params = []
    for name, p in model.named_parameters():
        p.requires_grad = any(name.startswith(t) for t in trained)
        if p.requires_grad:
            params.append(p)
    opt = torch.optim.AdamW(params, lr=LR)
    rows = draw_prompts(tasks, STEPS * BATCH, split=0, seed=900)
    rng = np.random.default_rng(0)
    model.train()
    t0 = time.perf_counter()
    for step in range(STEPS):
        picked = [rows[int(i)] for i in rng.choice(len(rows), BATCH, replace=False)]
        ids, lab = _batch(loaded.tokenizer, picked)
        loss = model(input_ids=ids, labels=lab).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == STEPS - 1:
            print(
                f"  sibling fine-tune step {step + 1}/{STEPS}: loss {loss.item():.3f} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    state = model.state_dict()
    return {k: state[k].detach().clone() for k in loaded.state_dict if k.startswith(tuple(trained))}


def sibling_model(loaded, tasks: dict[str, list[Example]], cache: Path):
    """`loaded` with the sibling's trained tensors in place (trained once, then cached)."""
    from serving.loader.load import LoadedModel

    path = cache / f"sibling-l{LAYERS}-s{STEPS}-b{BATCH}.pt"
    if path.is_file():
        tensors = torch.load(path)
    else:
        tensors = trained_tensors(loaded, tasks)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(tensors, path)
    state = {**loaded.state_dict, **tensors}
    return LoadedModel(loaded.config, state, loaded.tokenizer, f"{loaded.source} (sibling)")
