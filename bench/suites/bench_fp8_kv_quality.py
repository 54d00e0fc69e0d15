"""Quality cost of the FP8 (e4m3) KV cache against the bf16 cache, same model, same process:

- greedy agreement: 256 greedy tokens with each cache; share of positions equal before the first
  divergence and overall, and the first divergence step;
- log-likelihood of a fixed text (teacher-forced, the cache holding every key/value it reads):
  mean NLL per token with each cache and the difference.

Two settings: `--device cpu` runs the real SmolLM2-135M-Instruct weights (the GGUF on disk;
torch reference attention, float32 compute); `--device cuda` runs random-weight models of the real
configs through the GPU path (fused kernels + Triton attention). Scales are 1.0 (values stored
as-is; e4m3 spans +-448).

    python -m bench.suites.bench_fp8_kv_quality [--device cpu|cuda] [--new 256]
"""

from __future__ import annotations

import argparse
import math

import torch

from bench.common.results_table import Table, write_results
from serving.attention.base import AttentionMetadata

COLUMNS = [
    "model",
    "first divergence (step)",
    "greedy agreement",
    "NLL bf16",
    "NLL fp8",
    "diff",
    "text tokens",
]

FIXED_TEXT = (
    "The history of the lighthouse begins in the ancient world, where fires burning on hilltops "
    "guided ships toward safe harbors. The most famous of these, the Pharos of Alexandria, stood "
    "for more than a thousand years and was counted among the wonders of its age. Over the "
    "centuries, builders learned to raise taller towers, to protect the flame from wind and rain, "
    "and eventually to focus the light with mirrors and lenses. In the nineteenth century the "
    "Fresnel lens made it possible for a single lamp to be seen from more than twenty miles "
    "away, and keepers lived in small houses at the foot of the towers, trimming wicks and "
    "winding clockwork through the night. Today most lights are automated, but many of the old "
    "towers still stand along rocky coasts, kept by volunteers who remember the people who once "
    "tended them."
)


class Runner:
    """One sequence over a paged cache with block table 0..n-1: prefill, decode, score."""

    def __init__(self, model, forward, cache_dtype, max_len: int, device, block_size: int = 16):
        cfg = model.config
        self.model, self.forward, self.bs, self.device = model, forward, block_size, device
        nb = -(-max_len // block_size) + 1
        shape = (nb, block_size, cfg.num_key_value_heads, cfg.head_dim)
        self.caches = [
            (
                torch.zeros(shape, dtype=cache_dtype, device=device),
                torch.zeros(shape, dtype=cache_dtype, device=device),
            )
            for _ in range(cfg.num_hidden_layers)
        ]
        self.table = torch.arange(nb, dtype=torch.int32, device=device)[None, :]

    def step(self, ids: list[int], start: int) -> torch.Tensor:
        """Run tokens `ids` at positions start.. (cache holds 0..start-1); float32 logits."""
        n, end = len(ids), start + len(ids)
        dev = self.device
        pos = torch.arange(start, end, device=dev)
        meta = AttentionMetadata(
            query_start_loc=torch.tensor([0, n], dtype=torch.int32, device=dev),
            seq_lens=torch.tensor([end], dtype=torch.int32, device=dev),
            slot_mapping=pos.clone(),  # block table 0..n-1: slot == position
            block_tables=self.table,
            max_query_len=n,
            max_seq_len=end,
            num_decode_tokens=1 if n == 1 else 0,
            query_lens_cpu=[n],
            seq_lens_cpu=[end],
        )
        hidden = self.forward(torch.tensor(ids, device=dev), pos, self.caches, meta)
        return self.model.compute_logits(hidden)

    def greedy(self, prompt: list[int], new: int) -> list[int]:
        logits = self.step(prompt, 0)[-1]
        out = [int(logits.argmax())]
        for _ in range(new - 1):
            logits = self.step([out[-1]], len(prompt) + len(out) - 1)[-1]
            out.append(int(logits.argmax()))
        return out

    def nll(self, ids: list[int], chunk: int = 64) -> float:
        """Mean negative log-likelihood per token, fed in chunks so later chunks read the cache."""
        total, count = 0.0, 0
        for s in range(0, len(ids) - 1, chunk):
            part = ids[s : s + chunk]
            lp = self.step(part, s).log_softmax(-1)
            targets = ids[s + 1 : s + 1 + len(part)]
            rows = torch.arange(len(targets), device=lp.device)
            total -= float(lp[rows, torch.tensor(targets, device=lp.device)].sum())
            count += len(targets)
        return total / count


def compare(model, forward, device, prompt: list[int], text: list[int], new: int) -> dict:
    res = {}
    for name, dt in (("bf16", torch.bfloat16), ("fp8", torch.float8_e4m3fn)):
        with torch.inference_mode():
            r = Runner(model, forward, dt, len(prompt) + new + len(text) + 32, device)
            res[name] = {"tokens": r.greedy(prompt, new)}
            r2 = Runner(model, forward, dt, len(text) + 32, device)
            res[name]["nll"] = r2.nll(text)
    a, b = res["bf16"]["tokens"], res["fp8"]["tokens"]
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), len(a))
    return {
        "new_tokens": new,
        "first_divergence": first,
        "agreement_overall": sum(x == y for x, y in zip(a, b, strict=True)) / len(a),
        "nll_bf16": res["bf16"]["nll"],
        "nll_fp8": res["fp8"]["nll"],
        "nll_diff": res["fp8"]["nll"] - res["bf16"]["nll"],
        "ppl_ratio": math.exp(res["fp8"]["nll"] - res["bf16"]["nll"]),
        "text_tokens": len(text),
    }


def cpu_real(new: int, table: Table) -> None:
    from serving.attention.torch_ref import TorchRefBackend
    from serving.loader import default_model_path, load_model_files
    from serving.model import build_model

    torch.set_num_threads(2)
    loaded = load_model_files(default_model_path())
    model = build_model(loaded.config, loaded.state_dict, "cpu", torch.float32)
    backend = TorchRefBackend()
    tok = loaded.tokenizer
    prompt = tok.encode(
        "<|im_start|>user\nTell me a long story about a lighthouse keeper.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    text = tok.encode(FIXED_TEXT)

    def forward(ids, pos, caches, meta):
        return model(ids, pos, caches, meta, backend)

    r = compare(model, forward, "cpu", prompt, text, new)
    print(table.add("SmolLM2-135M-Instruct (real weights, CPU, torch_ref)", *_cells(r)), flush=True)


def gpu_random(new: int, table: Table) -> None:
    from bench.common.hf_random import hf_random_model, loaded_from_hf
    from serving.attention.triton_backend import TritonAttentionBackend
    from serving.kernels.fused_forward import fused_forward
    from serving.model import build_model
    from vigil.devtools.model_shapes import SHAPES

    backend = TritonAttentionBackend()
    g = torch.Generator().manual_seed(0)
    for name in ("smollm2-135m", "qwen3-0.6b"):
        shape = SHAPES[name]
        hf = hf_random_model(shape)
        loaded = loaded_from_hf(hf, shape, name)
        model = build_model(loaded.config, loaded.state_dict, "cuda", torch.bfloat16)
        del hf
        prompt = torch.randint(0, shape["vocab_size"], (32,), generator=g).tolist()
        text = torch.randint(0, shape["vocab_size"], (512,), generator=g).tolist()

        def forward(ids, pos, caches, meta, model=model):
            return fused_forward(model, ids, pos, caches, meta, backend)

        r = compare(model, forward, "cuda", prompt, text, new)
        print(table.add(f"{name} (random weights, GPU, Triton)", *_cells(r)), flush=True)


def _cells(r: dict) -> list[str]:
    return [
        str(r["first_divergence"]),
        f"{100 * r['agreement_overall']:.1f}%",
        f"{r['nll_bf16']:.4f}",
        f"{r['nll_fp8']:.4f}",
        f"{r['nll_diff']:+.4f}",
        str(r["text_tokens"]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--new", type=int, default=256)
    args = parser.parse_args()
    table = Table(f"FP8 vs bf16 KV cache, {args.new} greedy tokens + NLL of a fixed text", COLUMNS)
    print(f"## {table.title}\n{table.header()}")
    if args.device == "cpu":
        cpu_real(args.new, table)
    else:
        gpu_random(args.new, table)
    write_results("fp8_kv_quality", [table])


if __name__ == "__main__":
    main()
