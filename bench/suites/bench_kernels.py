"""Micro-benchmarks of the Triton kernels on the GPU, each against a peer in the same run:

- paged decode attention vs the torch reference backend (per-sequence SDPA), and its share of
  the measured copy bandwidth (KV bytes read / time);
- paged prefill attention vs torch SDPA (flash) on dense, unpaged tensors;
- fused RMSNorm+residual / SiLU-mul / rotary / q-k norm vs the model's eager torch ops, both
  captured in CUDA graphs (launch gaps removed, as in the engine's decode path);
- one decode step of random-weight SmolLM2-135M and Qwen3-4B shapes: eager model forward,
  graphed model forward, graphed fused forward.

Run on the device:
`python -m bench.suites.bench_kernels [--quick] [--only decode,prefill,fused,step]`.
"""

from __future__ import annotations

import argparse
import math
import traceback

import torch
import torch.nn.functional as F

from bench.common.gpu_timing import copy_bandwidth, time_eager, time_graph
from bench.common.results_table import Table, write_results
from bench.common.roofline import decode_step_bytes
from serving.attention.base import AttentionMetadata
from serving.attention.torch_ref import TorchRefBackend
from serving.attention.triton_backend import TritonAttentionBackend
from serving.kernels.fused_ops import rms_norm, rotary_inplace, silu_and_mul
from serving.kernels.paged_prefill import paged_prefill
from vigil.devtools.model_shapes import SHAPES


def paged_case(batch, ctx, qlen, hq, hk, d, bs=16, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    per = math.ceil(ctx / bs)
    nb = batch * per + 1
    kc = torch.randn(nb, bs, hk, d, device="cuda", generator=g).to(dtype)
    vc = torch.randn(nb, bs, hk, d, device="cuda", generator=g).to(dtype)
    tables = torch.randperm(nb, device="cuda", generator=g)[: batch * per].view(batch, per).int()
    q = torch.randn(batch * qlen, hq, d, device="cuda", generator=g).bfloat16()
    meta = AttentionMetadata(
        query_start_loc=torch.arange(0, batch * qlen + 1, qlen, device="cuda", dtype=torch.int32),
        seq_lens=torch.full((batch,), ctx, device="cuda", dtype=torch.int32),
        slot_mapping=torch.full((batch * qlen,), -1, device="cuda", dtype=torch.int64),
        block_tables=tables,
        max_query_len=qlen,
        max_seq_len=ctx,
        num_decode_tokens=batch if qlen == 1 else 0,
        query_lens_cpu=[qlen] * batch,
        seq_lens_cpu=[ctx] * batch,
    )
    return q, kc, vc, meta


def bench_decode(bw: float, quick: bool) -> Table:
    table = Table(
        "paged decode attention (bf16 unless noted); peer = torch_ref backend",
        [
            "shape (Hq/Hk/D)",
            "batch",
            "ctx",
            "triton us",
            "TB/s",
            "% copy bw",
            "torch_ref us",
            "speedup",
        ],
    )
    print(f"\n## {table.title}\n{table.header()}")
    tri, ref = TritonAttentionBackend(), TorchRefBackend()
    cases = [(1, 640), (1, 8192), (1, 32768), (16, 640), (64, 640), (64, 4096), (256, 640)]
    if quick:
        cases = cases[:2]
    for label, (hq, hk, d) in {"qwen3-4b": (32, 8, 128), "smollm2": (9, 3, 64)}.items():
        for batch, ctx in cases:
            for fp8 in (False, True) if (batch, ctx) == (64, 4096) else (False,):
                q, kc, vc, meta = paged_case(batch, ctx, 1, hq, hk, d)
                if fp8:
                    kc, vc = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
                scale = d**-0.5
                t = time_graph(
                    lambda q=q, kc=kc, vc=vc, m=meta, s=scale: tri.forward(q, kc, vc, m, s)
                )
                nbytes = batch * ctx * hk * d * 2 * kc.element_size()
                peer_us, speedup = None, None
                if not fp8 and batch * ctx <= 64 * 4096:
                    tr = time_eager(
                        lambda q=q, kc=kc, vc=vc, m=meta, s=scale: ref.forward(q, kc, vc, m, s), 3
                    )
                    peer_us, speedup = f"{tr * 1e6:.0f}", f"{tr / t:.1f}x"
                name = f"{label} {hq}/{hk}/{d}" + (" fp8" if fp8 else "")
                print(
                    table.add(
                        name,
                        batch,
                        ctx,
                        f"{t * 1e6:.1f}",
                        f"{nbytes / t / 1e12:.2f}",
                        f"{100 * nbytes / t / bw:.0f}%",
                        peer_us,
                        speedup,
                    ),
                    flush=True,
                )
    return table


def bench_prefill() -> Table:
    table = Table(
        "paged prefill attention (qwen3-4b heads 32/8/128); peer = dense SDPA (flash)",
        ["batch x prompt", "triton ms", "TFLOP/s", "SDPA ms", "triton/SDPA time"],
    )
    print(f"\n## {table.title}\n{table.header()}")
    hq, hk, d = 32, 8, 128
    for batch, plen in [(16, 128), (4, 2048), (1, 8192)]:
        q, kc, vc, meta = paged_case(batch, plen, plen, hq, hk, d)
        out = torch.empty_like(q)

        def run(q=q, kc=kc, vc=vc, meta=meta, out=out):
            paged_prefill(
                q,
                kc,
                vc,
                meta.block_tables,
                meta.seq_lens,
                meta.query_start_loc,
                out,
                d**-0.5,
                meta.max_query_len,
            )

        t = time_graph(run, inner=3)
        flops = 4 * batch * hq * d * plen * (plen + 1) / 2
        qd = torch.randn(batch, hq, plen, d, device="cuda", dtype=torch.bfloat16)
        kd = torch.randn(batch, hk, plen, d, device="cuda", dtype=torch.bfloat16)
        vd = torch.randn_like(kd)
        ts = time_graph(
            lambda qd=qd, kd=kd, vd=vd: F.scaled_dot_product_attention(
                qd, kd, vd, is_causal=True, enable_gqa=True
            ),
            inner=3,
        )
        print(
            table.add(
                f"{batch} x {plen}",
                f"{t * 1e3:.3f}",
                f"{flops / t / 1e12:.0f}",
                f"{ts * 1e3:.3f}",
                f"{t / ts:.2f}",
            ),
            flush=True,
        )
    return table


def bench_fused_ops() -> Table:
    from serving.model.layers import RMSNorm

    table = Table(
        "fused elementwise ops vs eager torch (both in CUDA graphs), qwen3-4b dims",
        ["op", "tokens", "eager us", "fused us", "speedup"],
    )
    print(f"\n## {table.title}\n{table.header()}")
    h, inter, hq, hk, d = 2560, 9728, 32, 8, 128
    norm = RMSNorm(h, 1e-6).cuda().bfloat16()
    qn = RMSNorm(d, 1e-6).cuda().bfloat16()
    for t in (1, 64, 256):
        ops = _fused_op_pairs(t, h, inter, hq, hk, d, norm, qn)
        for name, (eager, fused) in ops.items():
            te, tf = time_graph(eager, inner=36), time_graph(fused, inner=36)
            print(
                table.add(name, t, f"{te * 1e6:.1f}", f"{tf * 1e6:.1f}", f"{te / tf:.1f}x"),
                flush=True,
            )
    return table


def _fused_op_pairs(t, h, inter, hq, hk, d, norm, qn):
    from serving.model.rope import apply_rope

    x = torch.randn(t, h, device="cuda").bfloat16()
    r = torch.randn(t, h, device="cuda").bfloat16()
    gu = torch.randn(t, 2 * inter, device="cuda").bfloat16()
    qkv = torch.randn(t, (hq + 2 * hk) * d, device="cuda").bfloat16()
    q = qkv[:, : hq * d].view(t, hq, d)
    k = qkv[:, hq * d : (hq + hk) * d].view(t, hk, d)
    cos = torch.rand(t, d, device="cuda").bfloat16()
    sin = torch.rand(t, d, device="cuda").bfloat16()
    return {
        "add+rmsnorm": (lambda: norm(r + x), lambda: rms_norm(x, norm.weight, 1e-6, residual=r)),
        "silu*mul": (lambda: F.silu(gu[:, :inter]) * gu[:, inter:], lambda: silu_and_mul(gu)),
        "rope q+k": (
            lambda: (apply_rope(q, cos, sin), apply_rope(k, cos, sin)),
            lambda: (rotary_inplace(q, cos, sin), rotary_inplace(k, cos, sin)),
        ),
        "q/k norm": (
            lambda: (qn(q), qn(k)),
            lambda: (rms_norm(q, qn.weight, 1e-6), rms_norm(k, qn.weight, 1e-6)),
        ),
    }


def random_model(shape: str):
    from serving.loader.config import config_from_hf
    from serving.model.llama import LlamaForCausalLM

    cfg = config_from_hf(SHAPES[shape], {}, shape)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    for name, p in model.named_parameters():
        if "norm" in name:
            p.data.fill_(1.0)
        else:
            p.data.normal_(0, 0.02)
    from serving.model.rope import RotaryEmbedding

    model = model.bfloat16().eval()
    model.rotary = RotaryEmbedding(cfg).cuda()  # float32 inv_freq, as build_model leaves it
    return model, cfg


def _step_fn(mode, model, caches, backend, ids, pos, meta, per):
    from serving.engine.worker.cuda_graphs import GpuForward

    if mode == "eager":

        def step():
            h = model(ids, pos, caches, meta, backend)
            return model.compute_logits(h).argmax(-1)

        return step
    gf = GpuForward(
        model,
        caches,
        backend,
        max_batch=ids.shape[0],
        max_blocks_per_seq=per,
        max_seq_len_hint=4096,
        use_fused=mode == "graph-fused",
        buckets=(ids.shape[0],),
    )

    def graphed():
        return model.compute_logits(gf.forward(ids, pos, meta)).argmax(-1)

    return graphed


def decode_meta(batch: int, ctx: int, bs: int, per: int) -> AttentionMetadata:
    tables = torch.arange(batch * per, device="cuda", dtype=torch.int32).view(batch, per)
    slots = tables[:, (ctx - 1) // bs].long() * bs + (ctx - 1) % bs
    return AttentionMetadata(
        query_start_loc=torch.arange(batch + 1, device="cuda", dtype=torch.int32),
        seq_lens=torch.full((batch,), ctx, device="cuda", dtype=torch.int32),
        slot_mapping=slots,
        block_tables=tables,
        max_query_len=1,
        max_seq_len=ctx,
        num_decode_tokens=batch,
        query_lens_cpu=[1] * batch,
        seq_lens_cpu=[ctx] * batch,
    )


@torch.inference_mode()
def bench_model_shape(
    table: Table, shape: str, batches: tuple[int, ...], ctx: int = 640, bs: int = 16
) -> None:
    model, cfg = random_model(shape)
    per = ctx // bs + 1
    nb = max(batches) * per + 1
    shp = (nb, bs, cfg.num_key_value_heads, cfg.head_dim)
    caches = [
        (torch.randn(shp, device="cuda").bfloat16(), torch.randn(shp, device="cuda").bfloat16())
        for _ in range(cfg.num_hidden_layers)
    ]
    backend = TritonAttentionBackend()
    for batch in batches:
        ids = torch.randint(0, cfg.vocab_size, (batch,), device="cuda")
        pos = torch.full((batch,), ctx - 1, device="cuda")
        meta = decode_meta(batch, ctx, bs, per)
        times = []
        for mode in ("eager", "graph-model", "graph-fused"):
            step = _step_fn(mode, model, caches, backend, ids, pos, meta, per)
            times.append(time_eager(step, repeats=20, warmup=3))
        roof = decode_step_bytes(SHAPES[shape], batch, ctx) / 4.8e12
        print(
            table.add(
                shape,
                batch,
                f"{times[0] * 1e3:.3f}",
                f"{times[1] * 1e3:.3f}",
                f"{times[2] * 1e3:.3f}",
                f"{batch / times[2]:.0f}",
                f"{100 * roof / times[2]:.0f}%",
            ),
            flush=True,
        )


def bench_model_step(quick: bool) -> Table:
    table = Table(
        "one decode step, random weights, ctx 640 (incl. lm_head + argmax)",
        [
            "shape",
            "batch",
            "eager model ms",
            "graphed model ms",
            "graphed fused ms",
            "fused tok/s",
            "% HBM roofline",
        ],
    )
    print(f"\n## {table.title}\n{table.header()}")
    bench_model_shape(table, "smollm2-135m", (1, 64, 256))
    torch.cuda.empty_cache()
    if not quick:
        bench_model_shape(table, "qwen3-4b", (1, 64))
        torch.cuda.empty_cache()
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="decode,prefill,fused,step")
    args = parser.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    bw = copy_bandwidth()
    print(f"measured copy bandwidth: {bw / 1e12:.2f} TB/s (read + write)")
    sections = {
        "decode": lambda: bench_decode(bw, args.quick),
        "prefill": bench_prefill,
        "fused": bench_fused_ops,
        "step": lambda: bench_model_step(args.quick),
    }
    tables = []
    for part in args.only.split(","):
        try:  # one broken section must not hide the others' numbers
            tables.append(sections[part]())
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    write_results(
        "kernels", tables, [f"measured copy bandwidth: {bw / 1e12:.2f} TB/s (read + write)"]
    )


if __name__ == "__main__":
    main()
