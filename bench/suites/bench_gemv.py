"""One-token projections at the Qwen3-4B and SmolLM2-135M layer shapes: the engine's GEMV
(serving/kernels/gemv.py) with and without programmatic dependent launch, against cuBLAS
(`F.linear`), the down projection with its activation as a separate kernel, and a tensor-core
variant (x padded to 16 rows, weights streamed through `tl.dot`'s
shared-memory pipeline), as achieved HBM bandwidth against the measured copy bandwidth.

Each timing replays one CUDA graph that runs the projection over enough distinct weight copies
to overflow the 60 MB L2, as a decode step does over its layers.

Run on the device: `python -m bench.suites.bench_gemv`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.common.gpu_timing import copy_bandwidth, time_graph
from bench.common.results_table import Table, write_results
from serving.kernels import gemv as gemv_kernels
from serving.kernels import pdl
from serving.kernels._compat import HAS_TRITON, tl, triton
from serving.kernels.fused_ops import silu_and_mul

# (name, N, K, SiLU-and-mul input)
SHAPES = [
    ("qwen3-4b qkv", 6144, 2560, False),
    ("qwen3-4b o", 2560, 4096, False),
    ("qwen3-4b gate_up", 19456, 2560, False),
    ("qwen3-4b down", 2560, 9728, True),
    ("smollm2 qkv", 960, 576, False),
    ("smollm2 gate_up", 3072, 576, False),
    ("smollm2 down", 576, 1536, True),
]
if HAS_TRITON:  # pragma: no cover - GPU machine
    _DOT_CONFIGS = [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bn, bk, w, s in [
            (16, 256, 4, 4),
            (16, 512, 4, 3),
            (32, 256, 4, 4),
            (32, 128, 4, 5),
            (64, 128, 4, 4),
            (64, 256, 8, 3),
            (16, 128, 4, 6),
            (32, 512, 8, 3),
        ]
    ]

    @triton.autotune(configs=_DOT_CONFIGS, key=["N", "K"])
    @triton.jit
    def _dot_gemv(
        x_ptr, w_ptr, y_ptr, N, K, stride_w, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
    ):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        pad = tl.arange(0, 16)
        cols = tl.arange(0, BLOCK_K)
        acc = tl.zeros([16, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + cols
            x = tl.load(
                x_ptr + pad[:, None] * 0 + k[None, :],
                mask=(pad[:, None] == 0) & (k[None, :] < K),
                other=0.0,
            )
            w = tl.load(
                w_ptr + rows[:, None].to(tl.int64) * stride_w + k[None, :],
                mask=(rows[:, None] < N) & (k[None, :] < K),
                other=0.0,
            )
            acc += tl.dot(x, tl.trans(w))
        y = tl.sum(acc, axis=0)  # rows 1-15 of x are zero
        tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=rows < N)


def dot_gemv(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    n, k = weight.shape
    y = torch.empty(1, n, dtype=x.dtype, device=x.device)
    _dot_gemv[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)](x, weight, y, n, k, weight.stride(0))
    return y


def main() -> None:
    ceiling = copy_bandwidth()
    table = Table(
        f"one-token projection, GB/s of weight reads (copy bandwidth {ceiling / 1e9:.0f} GB/s)",
        [
            "shape",
            "N x K",
            "MB",
            "copies",
            "GEMV",
            "GEMV + PDL",
            "SiLU kernel + GEMV + PDL",
            "cuBLAS",
            "tl.dot x16",
            "GEMV+PDL / cuBLAS",
            "GEMV+PDL / copy",
        ],
    )
    print(table.header())
    for name, n, k, silu in SHAPES:
        mb = n * k * 2 / 1e6
        copies = max(4, int(240 / mb))
        g = torch.Generator(device="cuda").manual_seed(n + k)
        weights = [
            (torch.randn(n, k, device="cuda", generator=g) * 0.03).to(torch.bfloat16)
            for _ in range(copies)
        ]
        x = torch.randn(1, 2 * k if silu else k, device="cuda", generator=g).to(torch.bfloat16)
        act = x[:, :k] * torch.sigmoid(x[:, :k].float()).to(x.dtype) * x[:, k:] if silu else x

        def ours(x=x, weights=weights, silu=silu):
            for w in weights:
                gemv_kernels.gemv_silu(x, w) if silu else gemv_kernels.gemv(x, w)

        def cublas(act=act, weights=weights):
            for w in weights:
                F.linear(act, w)

        def dot(act=act.contiguous(), weights=weights):
            for w in weights:
                dot_gemv(act, w)

        def separate(x=x, weights=weights):
            for w in weights:
                gemv_kernels.gemv(silu_and_mul(x), w)

        rates = []
        for mode in ("off", "auto"):
            pdl.set_mode(mode)
            rates.append(copies * n * k * 2 / time_graph(ours, inner=1, repeats=30))
        rates.append(
            copies * n * k * 2 / time_graph(separate, inner=1, repeats=30) if silu else None
        )
        pdl.set_mode("auto")
        rates.append(copies * n * k * 2 / time_graph(cublas, inner=1, repeats=30))
        rates.append(copies * n * k * 2 / time_graph(dot, inner=1, repeats=30))
        ref = act.float() @ weights[0].float().T
        err = (dot_gemv(act.contiguous(), weights[0]).float() - ref).abs().max().item()
        assert err <= ref.abs().max().item() * 2**-7 + 1e-2, (name, err)
        print(
            table.add(
                name,
                f"{n} x {k}",
                f"{mb:.1f}",
                copies,
                *(r and f"{r / 1e9:.0f}" for r in rates),
                f"{rates[1] / rates[3]:.2f}",
                f"{rates[1] / ceiling:.0%}",
            ),
            flush=True,
        )
        del weights
    write_results("gemv", [table])


if __name__ == "__main__":
    main()
