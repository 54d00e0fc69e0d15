"""What engine spans out cost: the CPU time of `EngineSpans.emit` per finished request (the
span built and handed to the SDK's BatchSpanProcessor, exported to a null OTLP receiver), with
and without content, next to the traffic logger's own per-request work with spans off. The
work runs on the traffic logger's thread, off the request path; what it can take from the
streams is its share of the API process's GIL, which the last column puts against a busy API
process's request rate.

    .venv/bin/python -m bench.suites.bench_engine_spans [--requests 5000] [--rate 160]
"""

from __future__ import annotations

import argparse
import time

from bench.common.results_table import Table, write_results
from bench.targets.engine_spans_served import add_served_args, served_on_off
from bench.targets.null_otlp import NullOTLP
from serving.outputs import CompletionOutput, RequestMetrics, RequestOutput
from serving.traffic.logger import FinishedRequest
from serving.traffic.segments import SegmentInfo
from serving.traffic.spans import EngineSpans


def finished(i: int) -> FinishedRequest:
    now = time.monotonic()
    metrics = RequestMetrics(
        arrival_time=now - 1.2,
        first_scheduled_time=now - 1.19,
        first_token_time=now - 1.1,
        last_token_time=now,
        finished_time=now,
    )
    out = RequestOutput(
        f"chatcmpl-{i:08d}",
        "<|im_start|>user\nExplain paged attention briefly.<|im_end|>",
        list(range(128)),
        [
            CompletionOutput(
                0,
                "Paged attention keeps the KV cache in blocks. " * 10,
                "",
                list(range(256)),
                finish_reason="length",
            )
        ],
        True,
        metrics,
    )
    return FinishedRequest(out, SegmentInfo(tenant="acme", segment="web"), end_time=time.time())


def per_request_us(spans: EngineSpans, n: int) -> float:
    items = [finished(i) for i in range(n)]
    start = time.process_time()
    for k, item in enumerate(items, 1):
        spans.emit(item)
        if k % 1000 == 0:  # within the processor's queue (2048): none dropped
            spans.provider.force_flush(30_000)
    spans.provider.force_flush(30_000)  # the export thread's work is counted too
    return 1e6 * (time.process_time() - start) / n


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=5000)
    p.add_argument(
        "--rate",
        type=float,
        default=160.0,
        help="finished requests/s of a busy API process (64 streams x 256 tokens at ~40k tok/s)",
    )
    add_served_args(p)
    args = p.parse_args()
    if args.served:
        tables, notes = served_on_off(args)
        write_results("engine_spans", tables, notes)
        return 0
    sink = NullOTLP()
    table = Table(
        "engine spans: CPU per finished request (emit + batch export to a null receiver)",
        ["content", "us / request", f"share of one core at {args.rate:g} requests/s"],
    )
    print(table.header(), flush=True)
    for capture in (False, True):
        spans = EngineSpans(sink.url, model_name="SmolLM2-135M-Instruct", capture_content=capture)
        per_request_us(spans, 200)  # warm-up
        us = per_request_us(spans, args.requests)
        spans.close()
        print(
            table.add("on" if capture else "off", f"{us:.1f}", f"{us * args.rate / 1e4:.2f} %"),
            flush=True,
        )
    write_results(
        "engine_spans",
        [table],
        [
            f"{sink.requests} OTLP export requests received; spans off, nothing of OpenTelemetry "
            "is imported and "
            "the traffic logger's hand-off is unchanged",
            "process CPU time; the served on/off ratio is the --served run",
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
