"""Engine spans on vs off, served: the same streaming jobs at a fixed concurrency against
`vigil serve` started with spans off and with spans on (VIGIL_OTLP_TRACES_ENDPOINT pointing at a
null OTLP receiver in this process), the starts alternating (off, on, off, on, ...), so a
start-to-start difference falls on both sides. Figures: output tokens/s and TTFT p50 per round,
and on / off of the medians. bench_engine_spans.py's `--served` runs it."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import httpx

from bench.common.results_table import Table
from bench.targets.null_otlp import NullOTLP
from bench.targets.serving_server import (
    Storage,
    prompt_vocab,
    start_server,
    stop_server,
    write_random_model,
)
from bench.workloads.serving_load import KEY, run_load, workload


def add_served_args(p) -> None:
    p.add_argument("--served", action="store_true", help="spans on vs off on a served engine")
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default=None)
    p.add_argument("--tokenizer-dir", default=None, help="random weights of --shape (GPU runs)")
    p.add_argument("--shape", default="smollm2-135m")
    p.add_argument("--tiny-model", default=None, help="write a tiny random Llama here (CPU)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--num-prompts", type=int, default=512)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--starts", type=int, default=2, help="server starts per setting")
    p.add_argument("--rounds", type=int, default=2, help="rounds per start")
    p.add_argument("--client-procs", type=int, default=4)
    p.add_argument("--sample-rate", type=float, default=0.1)
    p.add_argument("--kv-cache-mb", type=int, default=24576)
    p.add_argument("--torch-threads", type=int, default=None)
    p.add_argument("--port", type=int, default=8775)
    p.add_argument("--log-prefix", default="/tmp/vigil_bench_engine_spans")


def _model(args) -> int:
    """Write the model the arguments name; the vocabulary prompts are drawn below."""
    if args.tiny_model:
        from bench.common.tiny_model import write_tiny_model

        args.model = str(write_tiny_model(Path(args.tiny_model)))
        return prompt_vocab(args.model, None)
    if args.tokenizer_dir:
        args.model = args.model or f"/tmp/vigil_{args.shape}_random"
        write_random_model(Path(args.model), Path(args.tokenizer_dir), args.shape, args.device)
        return prompt_vocab(args.model, args.shape)
    return prompt_vocab(args.model, None)


def _served_name(base: str) -> str:
    answer = httpx.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    return answer.json()["data"][0]["id"]


def served_on_off(args) -> tuple[list[Table], list[str]]:
    jobs = workload("random", args.num_prompts, _model(args), args.input_len, args.output_len)
    base = f"http://127.0.0.1:{args.port}"
    runs = Table(
        "engine spans off vs on, served (alternating server starts)",
        ["start", "spans", "round", "TTFT p50 ms", "output tok/s", "failed"],
    )
    print(runs.header(), flush=True)
    sink = NullOTLP()
    seen: dict[str, list[dict]] = {"off": [], "on": []}
    per_start: dict[str, list[float]] = {"off": [], "on": []}  # median tok/s of each start
    root = Path(f"{args.log_prefix}-dirs")
    for start in range(args.starts):
        for spans in ("off", "on"):
            store = Storage(root / f"{spans}{start}")
            store.dir.mkdir(parents=True, exist_ok=True)
            if spans == "on":
                os.environ["VIGIL_OTLP_TRACES_ENDPOINT"] = sink.url
            try:
                server = start_server(args, "separate", args.concurrency, args.sample_rate, store)
            finally:
                os.environ.pop("VIGIL_OTLP_TRACES_ENDPOINT", None)
            start_runs = []
            try:
                name = _served_name(base)
                warm = jobs[: args.concurrency]
                run_load(base, name, warm, args.client_procs, args.concurrency)
                for r in range(args.rounds):
                    out = run_load(base, name, jobs, args.client_procs, args.concurrency)
                    seen[spans].append(out)
                    start_runs.append(out["output_tok_s"])
                    ttft = out["ttft_p50_ms"]
                    print(
                        runs.add(
                            start + 1,
                            spans,
                            r + 1,
                            "-" if ttft is None else f"{ttft:.2f}",
                            f"{out['output_tok_s']:.0f}",
                            out["failed"],
                        ),
                        flush=True,
                    )
            finally:
                stop_server(server)
            per_start[spans].append(statistics.median(start_runs))
    pairs = [on / off for off, on in zip(per_start["off"], per_start["on"], strict=True) if off]
    med = {
        k: {m: statistics.median(o[m] for o in v) for m in ("output_tok_s", "ttft_p50_ms")}
        for k, v in seen.items()
    }
    if not med["off"]["output_tok_s"]:
        raise RuntimeError(f"no request succeeded with spans off; see {args.log_prefix}-*.log")
    ratio = med["on"]["output_tok_s"] / med["off"]["output_tok_s"]
    summary = Table(
        "engine spans on / off (medians over rounds)",
        ["concurrency", "off tok/s", "on tok/s", "on / off", "TTFT p50 added ms"],
    )
    summary.add(
        args.concurrency,
        f"{med['off']['output_tok_s']:.0f}",
        f"{med['on']['output_tok_s']:.0f}",
        f"{ratio:.3f}",
        f"{med['on']['ttft_p50_ms'] - med['off']['ttft_p50_ms']:+.2f}",
    )
    print(summary.markdown(), flush=True)
    notes = [
        f"{sink.requests} OTLP export requests received from the spans-on engine; "
        f"target on / off >= 0.98 ({'met' if ratio >= 0.98 else 'missed'})",
        f"{args.starts} starts per setting, {args.rounds} rounds of {args.num_prompts} jobs "
        f"each, sample rate {args.sample_rate:g} on both",
        "on / off of each start with the off start just before it: "
        + ", ".join(f"{r:.3f}" for r in pairs)
        + " (a load change on the machine between starts shows as pairs that disagree)",
    ]
    sink.close()
    return [runs, summary], notes
