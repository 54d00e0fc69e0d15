"""A decode step's CUDA kernels grouped into classes, against the memory roofline.

Classes: GEMM (cuBLAS' nvjet/xmma/cutlass kernels, split-K reduces, the engine's Triton GEMV,
any matmul), attention (the engine's Triton paged decode/merge/prefill kernels,
serving/kernels/paged_*.py), norm/activation/rotary/elementwise (the engine's fused RMSNorm,
SiLU-and-mul, rotary and QKV-rope-cache-write kernels and torch's elementwise ones),
sampling/logits (the logit statistics, serving/kernels/logit_stats.py, and torch's softmax,
argmax, sort, top-k, random draws), memcpy/memset, and other.

Per class: GPU ms per step and its share of all kernel time; for GEMM the weight bytes a step
reads over its time, for attention the KV bytes (every sequence's context x layers x KV heads x
head dim x 2 x element bytes) over its time, each against the H200's 4.8 TB/s. The gap between
the measured step and the roofline step ((weights + KV) / 4.8 TB/s) splits exactly into each
class's time above its bytes at 4.8 TB/s (all of it for classes the roofline counts no bytes
for), kernel overlap (GPU busy time less the kernel sum: programmatic launch runs kernels
concurrently) and GPU idle time (step wall time less GPU busy time: the host's share).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from bench.common.results_table import Table
from bench.common.roofline import HBM_BYTES_PER_S, kv_bytes_per_token, weight_bytes

GEMM = "GEMM"
ATTENTION = "attention"
ELEMENTWISE = "norm/activation/rotary/elementwise"
SAMPLING = "sampling/logits"
MEMORY = "memcpy/memset"
OTHER = "other"
CLASSES = (GEMM, ATTENTION, ELEMENTWISE, SAMPLING, MEMORY, OTHER)

# the engine's Triton kernels, by their function names (the kernel names the profiler records)
EXACT = {
    "_decode_kernel": ATTENTION,
    "_merge_kernel": ATTENTION,
    "_prefill_kernel": ATTENTION,
    "_chunk_kernel": SAMPLING,
    "_fold_kernel": SAMPLING,
    "_gemv_body": GEMM,
    "_rms_norm_kernel": ELEMENTWISE,
    "_silu_mul_kernel": ELEMENTWISE,
    "_rotary_kernel": ELEMENTWISE,
    "_qkv_rope_cache_kernel": ELEMENTWISE,
    "_write_kv_kernel": ELEMENTWISE,
}
# substrings of lower-cased names, tried in this order
MARKERS = (
    (MEMORY, ("memcpy", "memset")),
    (ATTENTION, ("flash", "fmha", "attention", "attn")),
    (GEMM, ("gemm", "gemv", "nvjet", "cutlass", "xmma", "matmul", "splitkreduce", "cublas")),
    (
        SAMPLING,
        ("softmax", "argmax", "topk", "sort", "multinomial", "exponential", "distribution"),
    ),
    (
        ELEMENTWISE,
        ("elementwise", "norm", "silu", "rotary", "rope", "copy", "fill", "index", "gather"),
    ),
)


def kernel_class(name: str) -> str:
    if name in EXACT:
        return EXACT[name]
    low = name.lower()
    for cls, markers in MARKERS:
        if any(m in low for m in markers):
            return cls
    return OTHER


@dataclass(frozen=True)
class Kernel:
    name: str
    start_us: float
    end_us: float

    @property
    def us(self) -> float:
        return self.end_us - self.start_us


def busy_us(kernels: list[Kernel]) -> float:
    """Time at least one kernel ran (the union of their intervals)."""
    total, end = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda k: k.start_us):
        if k.end_us > end:
            total += k.end_us - max(k.start_us, end)
            end = k.end_us
    return total


@dataclass
class StepProfile:
    """`steps` decode steps of `batch` sequences at `mean_context` tokens: their kernels (from
    the profiler) and the step's wall time (timed without the profiler)."""

    shape_name: str
    shape: dict
    batch: int
    steps: int
    mean_context: float
    wall_ms: float
    kernels: list[Kernel]

    def class_ms(self) -> dict[str, float]:
        ms = dict.fromkeys(CLASSES, 0.0)
        for k in self.kernels:
            ms[kernel_class(k.name)] += k.us / 1e3 / self.steps
        return ms

    def class_bytes(self) -> dict[str, float]:
        """Bytes the roofline counts per step for each class (GEMM: weights, attention: KV)."""
        kv = self.batch * self.mean_context * kv_bytes_per_token(self.shape)
        return {GEMM: float(weight_bytes(self.shape)), ATTENTION: kv}

    def kernel_ms(self) -> float:
        return sum(k.us for k in self.kernels) / 1e3 / self.steps

    def busy_ms(self) -> float:
        return busy_us(self.kernels) / 1e3 / self.steps

    def roofline_ms(self) -> float:
        return 1e3 * sum(self.class_bytes().values()) / HBM_BYTES_PER_S


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def class_table(p: StepProfile) -> Table:
    table = Table(
        f"{p.shape_name} batch {p.batch}: GPU time per decode step by kernel class "
        f"({p.steps} steps, mean context {p.mean_context:.0f})",
        [
            "class",
            "GPU ms / step",
            "share of kernel time",
            "bytes / step (roofline)",
            "achieved TB/s",
            "% of 4.8 TB/s",
            "ms at 4.8 TB/s",
            "ms above it",
            "share of the gap to the roofline",
        ],
    )
    ms, nbytes, total = p.class_ms(), p.class_bytes(), p.kernel_ms()
    gap = p.wall_ms - p.roofline_ms()
    for cls in CLASSES:
        b = nbytes.get(cls)
        ideal = 1e3 * b / HBM_BYTES_PER_S if b else 0.0
        rate = b / (ms[cls] / 1e3) if b and ms[cls] > 0 else None
        table.add(
            cls,
            f"{ms[cls]:.3f}",
            _pct(ms[cls] / total) if total else "-",
            f"{b / 1e9:.2f} GB" if b else "-",
            f"{rate / 1e12:.2f}" if rate else "-",
            _pct(rate / HBM_BYTES_PER_S) if rate else "-",
            f"{ideal:.3f}",
            f"{ms[cls] - ideal:.3f}",
            _pct((ms[cls] - ideal) / gap) if gap > 0 else "-",
        )
    busy = p.busy_ms()
    for name, extra in (
        ("kernel overlap (busy - kernel sum)", busy - total),
        ("GPU idle (step wall - busy)", p.wall_ms - busy),
    ):
        table.add(
            name,
            "-",
            "-",
            "-",
            "-",
            "-",
            "0",
            f"{extra:.3f}",
            _pct(extra / gap) if gap > 0 else "-",
        )
    table.add(
        "step (wall)",
        f"{p.wall_ms:.3f}",
        "-",
        f"{sum(nbytes.values()) / 1e9:.2f} GB",
        f"{sum(nbytes.values()) / (p.wall_ms / 1e3) / 1e12:.2f}",
        _pct(p.roofline_ms() / p.wall_ms),
        f"{p.roofline_ms():.3f}",
        f"{gap:.3f}",
        "100 %" if gap > 0 else "-",
    )
    return table


def step_table(profiles: list[StepProfile]) -> Table:
    table = Table(
        "decode step against the memory roofline (weights + KV at the mean context, 4.8 TB/s)",
        [
            "shape",
            "batch",
            "mean context",
            "step wall ms",
            "measured tok/s",
            "roofline tok/s",
            "% roofline",
            "kernel sum ms",
            "GPU busy ms",
            "GPU idle ms",
        ],
    )
    for p in profiles:
        busy = p.busy_ms()
        table.add(
            p.shape_name,
            p.batch,
            f"{p.mean_context:.0f}",
            f"{p.wall_ms:.3f}",
            f"{1e3 * p.batch / p.wall_ms:.0f}",
            f"{1e3 * p.batch / p.roofline_ms():.0f}",
            _pct(p.roofline_ms() / p.wall_ms),
            f"{p.kernel_ms():.3f}",
            f"{busy:.3f}",
            f"{p.wall_ms - busy:.3f}",
        )
    return table


def top_table(p: StepProfile, n: int = 10, width: int = 72) -> Table:
    table = Table(
        f"{p.shape_name} batch {p.batch}: top {n} kernels by GPU time",
        ["kernel", "class", "launches / step", "us / launch", "ms / step", "share"],
    )
    us: dict[str, float] = defaultdict(float)
    launches: dict[str, int] = defaultdict(int)
    for k in p.kernels:
        us[k.name] += k.us
        launches[k.name] += 1
    total = sum(us.values())
    for name in sorted(us, key=us.get, reverse=True)[:n]:
        short = name if len(name) <= width else name[: width - 3] + "..."
        table.add(
            f"`{short.replace('|', '/')}`",
            kernel_class(name),
            f"{launches[name] / p.steps:.1f}",
            f"{us[name] / launches[name]:.1f}",
            f"{us[name] / 1e3 / p.steps:.3f}",
            _pct(us[name] / total),
        )
    return table
