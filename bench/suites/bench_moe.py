"""One mixture-of-experts layer's experts on the GPU at the layer shapes of Qwen3-30B-A3B
(128 experts, top-8, H 2048, I 768) and gpt-oss-20B (32 experts, top-4, H 2880, I 2880, biases,
clamped SwiGLU), random bf16 weights: the Triton grouped GEMM (serving/kernels/moe_gemm.py)
against the memory roofline and against the torch experts (one matmul per expert, the CPU path
and oracle), at decode batches of 1-256 tokens and a 2,048-token prefill.

Roofline bytes: the experts the batch routes to (counted from the routing itself), their weights
read once, plus the activations in and out; over the measured device copy bandwidth. The routing
is uniform at random, as a trained router's load balancing makes it on average.

Each timing replays one CUDA graph running the layer over enough distinct weight copies to
overflow the L2, as a decode step does over its layers (the torch path, which reads the routing
on the host, is timed eagerly).

Run on the device: `python -m bench.suites.bench_moe`.
"""

from __future__ import annotations

import torch

from bench.common.gpu_timing import copy_bandwidth, time_eager, time_graph
from bench.common.results_table import Table, write_results
from serving.kernels.moe_activation import SILU, SWIGLU_OAI, ExpertActivation
from serving.kernels.moe_gemm import fused_experts
from serving.kernels.moe_reference import experts_reference

# name: (experts, top_k, hidden, inner, activation, biases)
LAYERS = {
    "qwen3-30b-a3b": (128, 8, 2048, 768, ExpertActivation(SILU), False),
    "gpt-oss-20b": (32, 4, 2880, 2880, ExpertActivation(SWIGLU_OAI, 1.702, 7.0), True),
}
BATCHES = [1, 4, 16, 64, 256, 2048]
L2_BYTES = 60 << 20


def _layer_copies(experts, hidden, inner, bias, copies):
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape):
        return (torch.randn(*shape, device="cuda", generator=g) * 0.02).to(torch.bfloat16)

    return [
        (
            rnd(experts, 2 * inner, hidden),
            rnd(experts, hidden, inner),
            rnd(experts, 2 * inner) if bias else None,
            rnd(experts, hidden) if bias else None,
        )
        for _ in range(copies)
    ]


def _time(layers, x, ids, weights, act) -> tuple[float, float]:
    """Seconds per layer: the grouped GEMM (graph-replayed over the weight copies) and the torch
    per-expert path (eager, one copy)."""

    def triton_layers():
        for w13, w2, b13, b2 in layers:
            fused_experts(x, w13, w2, ids, weights, act, b13, b2)

    def torch_layer():
        w13, w2, b13, b2 = layers[0]
        experts_reference(x, w13, w2, ids, weights, act, b13, b2)

    triton_layers()  # compile outside the capture
    return time_graph(triton_layers) / len(layers), time_eager(torch_layer)


def bench_layer(name: str, table: Table, bandwidth: float) -> None:
    experts, top_k, hidden, inner, act, bias = LAYERS[name]
    per_expert = 3 * hidden * inner * 2
    copies = max(2, -(-2 * L2_BYTES // (experts * per_expert)))
    layers = _layer_copies(experts, hidden, inner, bias, copies)
    g = torch.Generator(device="cuda").manual_seed(1)
    for batch in BATCHES:
        x = torch.randn(batch, hidden, device="cuda", generator=g).to(torch.bfloat16)
        scores = torch.rand(batch, experts, device="cuda", generator=g)
        ids = torch.topk(scores, top_k, dim=-1).indices
        weights = torch.softmax(torch.rand(batch, top_k, device="cuda", generator=g), -1)
        weights = weights.to(torch.bfloat16)
        touched = int(torch.unique(ids).numel())
        nbytes = touched * per_expert + 2 * batch * hidden * 2

        seconds, eager = _time(layers, x, ids, weights, act)
        roof = nbytes / bandwidth
        print(
            table.add(
                name,
                batch,
                touched,
                f"{nbytes / 2**20:.1f}",
                f"{seconds * 1e6:.1f}",
                f"{roof * 1e6:.1f}",
                f"{roof / seconds:.0%}",
                f"{eager * 1e6:.1f}",
                f"{eager / seconds:.1f}x",
            ),
            flush=True,
        )


def main() -> None:
    bandwidth = copy_bandwidth()
    table = Table(
        "experts of one layer (bf16, uniform random routing)",
        [
            "layer",
            "tokens",
            "experts hit",
            "MiB read",
            "grouped GEMM µs",
            "roofline µs",
            "% roofline",
            "torch per expert µs",
            "speed-up",
        ],
    )
    print(table.header(), flush=True)
    for name in LAYERS:
        bench_layer(name, table, bandwidth)
    write_results(
        "moe",
        [table],
        [f"copy bandwidth {bandwidth / 1e12:.2f} TB/s (read + write) is the roofline's ceiling"],
    )


if __name__ == "__main__":
    main()
