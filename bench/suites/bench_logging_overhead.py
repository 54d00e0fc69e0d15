"""Engine throughput with traffic sampling at 100 % against sampling off, same process, same
engine, same requests.

"On": every finished request goes through the server's real bookkeeping
(`serving.server.api.generation.generate`) to the TrafficLogger, which builds a sample record and
submits it to storage's SampleWriter, which commits it to SQLite. "Off": the same bookkeeping
with no sink. Rounds alternate off/on (then on/off) so load drift on a shared machine hits both
alike; each round runs the same batch of concurrent fixed-length requests (ignore_eos).

Reported: tokens/s per round and the median of the paired (adjacent) on/off ratios with its
standard error; and, as a load-independent measure, the CPU time the logging threads (logger +
writer) used as a share of the engine loop thread's CPU time over the same rounds: that CPU (and
the GIL time inside it) is all that logging can take away from the engine. Exit status 0 when
that share is <= 2 %, every record reached SQLite, and the wall-clock overhead is <= 2 % or
the machine is too noisy to resolve 2 %.

    .venv/bin/python -m bench.suites.bench_logging_overhead [--rounds 20] [--requests 8] \
        [--max-tokens 12] [--threads 1] [--redact]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common.results_table import Table, write_results

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def make_settings(**overrides):
    """Engine settings for the bench: a small KV pool, one torch thread, no sampling unless
    asked."""
    from vigil.config import load_settings

    base = dict(
        env="development",
        api_keys=["bench-key"],
        max_model_len=512,
        kv_cache_memory_mb=64,
        torch_threads=1,
        sample_rate=0.0,
        segment_min_per_hour=0,
    )
    base.update(overrides)
    return load_settings(**base)


def new_engine(**overrides):
    """A started AsyncLLMEngine over the default SmolLM2 weights."""
    import torch

    from serving.engine import AsyncLLMEngine, EngineConfig, build_engine
    from serving.loader import load_model_files

    settings = make_settings(**overrides)
    torch.set_num_threads(settings.torch_threads)
    engine = AsyncLLMEngine(
        build_engine(EngineConfig.from_settings(settings), loaded=load_model_files())
    )
    engine.start()
    return engine


def thread_cpu(names: tuple[str, ...]) -> float:
    """CPU seconds used so far by the live threads with these names."""
    total = 0.0
    for t in threading.enumerate():
        if t.name in names and t.ident is not None:
            with contextlib.suppress(OSError, ProcessLookupError):  # the thread just ended
                total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    return total


async def one_round(state, n: int, max_tokens: int, tag: str) -> int:
    from serving.sampling_params import SamplingParams
    from serving.server.api.generation import collect_final, generate
    from serving.traffic.segments import SegmentInfo

    tok = state.tokenizer
    streams = []
    for i in range(n):
        prompt = f"Request {i}: write about the sea and the ships on it."
        params = SamplingParams(max_tokens=max_tokens, temperature=0.8, seed=i, ignore_eos=True)
        streams.append(
            generate(
                state,
                f"{tag}-{i}",
                tok.encode(prompt),
                params,
                prompt=prompt,
                segment=SegmentInfo(tenant=f"t{i % 3}"),
                tools=[],
            )
        )
    finals = await collect_final(streams)
    return sum(len(c.token_ids) for out in finals for c in out.outputs)


def main() -> int:
    ap = argparse.ArgumentParser(description="traffic-logging overhead on engine throughput")
    ap.add_argument("--rounds", type=int, default=20, help="rounds per configuration")
    ap.add_argument("--requests", type=int, default=8, help="concurrent requests per round")
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--redact", action="store_true", help="also redact PII in the logged records")
    args = ap.parse_args()

    from sqlalchemy import func, select

    from serving.server.service.app import create_app
    from storage.db import session_scope
    from storage.migrate import upgrade
    from storage.models import Sample
    from storage.writer import SampleWriter

    engine = new_engine(torch_threads=args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="vigil-bench-"))
    db = f"sqlite:///{tmp}/bench.db"
    upgrade(db)
    writer = SampleWriter(db, tmp / "journal")
    states = {
        "off": create_app(make_settings(), engine=engine, log_traffic=False).state.vigil,
        "on": create_app(
            make_settings(sample_rate=1.0, redact_pii=args.redact, database_url=db),
            engine=engine,
            writer=writer,
        ).state.vigil,
    }
    logging_threads = ("vigil-traffic", "vigil-sample-writer")
    tps: dict[str, list[float]] = {"off": [], "on": []}
    cpu = {"engine_on": 0.0, "logging_on": 0.0}

    async def run() -> None:
        for name in ("off", "on"):  # warm-up
            await one_round(states[name], args.requests, 4, f"warm-{name}")
        for r in range(args.rounds):
            for name in ("off", "on") if r % 2 == 0 else ("on", "off"):
                e0, l0 = thread_cpu(("vigil-engine-loop",)), thread_cpu(logging_threads)
                start = time.perf_counter()
                tokens = await one_round(
                    states[name], args.requests, args.max_tokens, f"r{r}-{name}"
                )
                secs = time.perf_counter() - start
                if name == "on":
                    await asyncio.to_thread(writer.flush, 30)  # its cost lands in this round
                    cpu["engine_on"] += thread_cpu(("vigil-engine-loop",)) - e0
                    cpu["logging_on"] += thread_cpu(logging_threads) - l0
                tps[name].append(tokens / secs)
                print(
                    f"round {r + 1:2d} sampling {name:>3}: {tokens} tokens in {secs:6.2f}s "
                    f"= {tokens / secs:6.1f} tok/s",
                    flush=True,
                )

    asyncio.run(run())
    for state in states.values():
        state.traffic.close(30)
    writer.close(30)
    asyncio.run(engine.shutdown())
    with session_scope(db) as s:
        rows = s.scalar(select(func.count()).select_from(Sample))

    pairs = [on / off for on, off in zip(tps["on"], tps["off"], strict=True)]
    ratio = statistics.median(pairs)
    stderr = statistics.stdev(pairs) / len(pairs) ** 0.5 if len(pairs) > 1 else float("nan")
    med_off, med_on = statistics.median(tps["off"]), statistics.median(tps["on"])
    cpu_share = cpu["logging_on"] / cpu["engine_on"] * 100
    expected = args.requests * (args.rounds + 1)
    print(f"\nsampling off : median {med_off:6.1f} tok/s")
    print(
        f"sampling 100%: median {med_on:6.1f} tok/s  (redaction {'on' if args.redact else 'off'})"
    )
    print(
        f"paired on/off ratio: median {ratio:.4f} (rounds: {', '.join(f'{p:.3f}' for p in pairs)})"
    )
    print(
        f"throughput overhead (median of pairs): {(1 - ratio) * 100:+.2f}% "
        f"+- {stderr * 100:.2f}% (standard error of the pairs; target <= 2%)"
    )
    if stderr * 100 > 2.0:
        print(
            "  the wall-clock A/B cannot resolve 2% at this noise level (machine shared/loaded);"
            " the CPU accounting below is the load-independent measure"
        )
    print(
        f"logging threads CPU = {cpu['logging_on']:.3f}s vs engine loop CPU = "
        f"{cpu['engine_on']:.2f}s "
        f"-> {cpu_share:.2f}% extra CPU"
    )
    print(
        f"rows in SQLite: {rows} (expected {expected}); writer written={writer.written} "
        f"journaled={writer.journaled} rejected={writer.rejected} dropped={writer.dropped}"
    )
    table = Table(
        f"{args.rounds} rounds x {args.requests} requests x {args.max_tokens} tokens, "
        f"{args.threads} torch thread(s), redaction {'on' if args.redact else 'off'}",
        ["measure", "value"],
    )
    table.add("sampling off, median tok/s", f"{med_off:.1f}")
    table.add("sampling 100%, median tok/s", f"{med_on:.1f}")
    table.add(
        "throughput overhead (median of paired rounds)",
        f"{(1 - ratio) * 100:+.2f}% +- {stderr * 100:.2f}%",
    )
    table.add("logging threads CPU / engine loop CPU", f"{cpu_share:.2f}%")
    table.add("rows in SQLite / expected", f"{rows} / {expected}")
    write_results("logging_overhead", [table])
    resolved = stderr * 100 <= 2.0
    ok_wall = (1 - ratio) * 100 <= 2.0 or not resolved
    return 0 if cpu_share <= 2.0 and ok_wall and rows == expected else 1


if __name__ == "__main__":
    sys.exit(main())
