"""Load generation for bench_serving: workloads (input/output lengths), client worker processes
that send streaming /v1/completions at Poisson arrival times or at a fixed concurrency, and the
summary (throughput, TTFT/TPOT/ITL percentiles, goodput at an SLO).

Prompts are token id lists, so the server tokenizes nothing and the offline engine gets the
very same inputs. Clients run in several processes so the client is never the bottleneck; each
reports the CPU seconds it used.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import numpy as np

KEY = "vigil-dev-key"
SLO_TTFT_S, SLO_TPOT_S = 0.200, 0.050


@dataclass
class Job:
    index: int
    prompt_ids: list[int]
    max_tokens: int
    send_at: float = 0.0  # seconds after the run's start (Poisson mode)


def workload(
    kind: str, num: int, vocab: int, in_len: int, out_len: int, seed: int = 0
) -> list[Job]:
    """`random`: lengths uniform in [0.5, 1.5] x the means; `chat`: a mix of short questions,
    long-context questions and long answers."""
    rng = random.Random(seed)
    jobs = []
    for i in range(num):
        if kind == "random":
            n_in = rng.randint(max(1, in_len // 2), max(1, in_len * 3 // 2))
            n_out = rng.randint(max(1, out_len // 2), max(1, out_len * 3 // 2))
        elif kind == "chat":
            shape = rng.choices(["short", "context", "essay"], weights=[0.6, 0.25, 0.15])[0]
            n_in = {
                "short": rng.randint(16, 64),
                "context": rng.randint(192, 384),
                "essay": rng.randint(24, 80),
            }[shape]
            n_out = {
                "short": rng.randint(out_len // 2, out_len),
                "context": rng.randint(8, out_len // 2 + 8),
                "essay": rng.randint(out_len, 2 * out_len),
            }[shape]
        else:
            raise ValueError(f"unknown workload {kind!r}")
        jobs.append(Job(i, [rng.randrange(100, vocab) for _ in range(n_in)], n_out))
    return jobs


def poisson_schedule(jobs: list[Job], rate: float, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    t = 0.0
    for job in jobs:
        job.send_at = t
        t += float(rng.exponential(1.0 / rate)) if rate != float("inf") else 0.0


async def sse_lines(texts: AsyncIterator[str]) -> AsyncIterator[str]:
    """Lines as SSE ends them (LF, CRLF or CR), not as str.splitlines() does (httpx's
    aiter_lines): a token's text may hold U+2028 or U+0085 raw inside the JSON."""
    pending = ""
    async for text in texts:
        pending += text
        *lines, pending = re.split(r"\r\n|\n|\r(?=.)", pending, flags=re.S)
        for line in lines:
            yield line
    if pending:
        yield pending.rstrip("\r")


async def _one(client: httpx.AsyncClient, url: str, model: str, job: Job) -> dict:
    body = {
        "model": model,
        "prompt": job.prompt_ids,
        "max_tokens": job.max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    stamps: list[float] = []
    tokens, error = 0, None
    try:
        async with client.stream(
            "POST", url, json=body, headers={"Authorization": f"Bearer {KEY}"}
        ) as r:
            if r.status_code != 200:
                error = f"{r.status_code}"
            async for line in sse_lines(r.aiter_text()):
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("error"):  # in-band: the stream failed after its headers
                    error = str(chunk["error"].get("code") or "stream error")
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
                if chunk.get("choices") and chunk["choices"][0].get("text"):
                    stamps.append(time.perf_counter())
    except httpx.HTTPError as exc:
        error = type(exc).__name__
    end = time.perf_counter()
    return {
        "index": job.index,
        "start": start,
        "end": end,
        "stamps": stamps,
        "tokens": tokens,
        "error": error,
    }


async def _drive(
    base: str, model: str, jobs: list[Job], concurrency: int | None, t0: float
) -> list[dict]:
    url = f"{base}/v1/completions"
    limits = httpx.Limits(max_connections=(concurrency or len(jobs)) + 4)
    async with httpx.AsyncClient(timeout=1800, limits=limits) as client:
        if concurrency:  # closed loop: `concurrency` requests outstanding at all times
            # every worker's lanes open together: concurrency N with N prompts is one burst
            await asyncio.sleep(max(0.0, t0 - time.time()))
            queue = list(jobs)
            results: list[dict] = []

            async def lane() -> None:
                while queue:
                    results.append(await _one(client, url, model, queue.pop(0)))

            await asyncio.gather(*[lane() for _ in range(concurrency)])
            return results

        async def at(job: Job) -> dict:  # open loop: sent at its arrival time, whatever the server
            await asyncio.sleep(max(0.0, t0 + job.send_at - time.time()))
            return await _one(client, url, model, job)

        return list(await asyncio.gather(*[at(job) for job in jobs]))


def _worker(args) -> tuple[list[dict], float]:
    base, model, jobs, concurrency, t0 = args
    cpu = time.process_time()
    results = asyncio.run(_drive(base, model, jobs, concurrency, t0))
    offset = time.time() - time.perf_counter()  # perf_counter is per process: report wall times
    for r in results:
        r["start"] += offset
        r["end"] += offset
        r["stamps"] = [s + offset for s in r["stamps"]]
    return results, time.process_time() - cpu


def split_jobs(
    jobs: list[Job], workers: int, concurrency: int | None
) -> list[tuple[list[Job], int | None]]:
    """(jobs, lanes) per client process. Closed loop: no more processes than lanes, and each
    process gets its lanes' share of the jobs, so `concurrency` bounds what is outstanding (a
    process with jobs and no lane would send them all at once). Open loop: jobs dealt
    round-robin."""
    if not concurrency:
        return [(jobs[i::workers], None) for i in range(workers) if jobs[i::workers]]
    workers = min(workers, concurrency)
    lanes = [
        concurrency // workers + (1 if i < concurrency % workers else 0) for i in range(workers)
    ]
    starts = [sum(lanes[:i]) for i in range(workers)]
    shares = [
        [job for k, job in enumerate(jobs) if starts[i] <= k % concurrency < starts[i] + lanes[i]]
        for i in range(workers)
    ]
    return [(share, n) for share, n in zip(shares, lanes, strict=True) if share]


def run_load(base: str, model: str, jobs: list[Job], workers: int, concurrency: int | None) -> dict:
    """Split the jobs over `workers` client processes; returns the summary."""
    parts_in = split_jobs(jobs, workers, concurrency)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(len(parts_in)) as pool:
        t0 = (
            time.time() + 2.0
        )  # every worker starts the clock together (spawned and imported by then)
        parts = pool.map(_worker, [(base, model, share, lanes, t0) for share, lanes in parts_in])
    results = [r for part, _ in parts for r in part]
    summary = summarize(results)
    summary["client_cpu_s"] = round(sum(cpu for _, cpu in parts), 2)
    return summary


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(results: list[dict]) -> dict:
    ok = [r for r in results if r["error"] is None and r["stamps"]]
    start = min(r["start"] for r in results)
    wall = max(r["end"] for r in results) - start
    ttft = [r["stamps"][0] - r["start"] for r in ok]
    tpot = [(r["end"] - r["stamps"][0]) / (r["tokens"] - 1) for r in ok if r["tokens"] > 1]
    itl = [b - a for r in ok for a, b in zip(r["stamps"], r["stamps"][1:], strict=False)]
    good = [
        r
        for r in ok
        if r["stamps"][0] - r["start"] <= SLO_TTFT_S
        and (r["tokens"] <= 1 or (r["end"] - r["stamps"][0]) / (r["tokens"] - 1) <= SLO_TPOT_S)
    ]
    completed = sum(1 for r in results if r["error"] is None)  # answered in full, tokens or not
    out = {
        "requests": len(results),
        "completed": completed,
        "failed": len(results) - len(ok),
        "wall_s": round(wall, 3),
        "request_throughput": len(ok) / wall,
        "output_tok_s": sum(r["tokens"] for r in ok) / wall,
        "goodput_req_s": len(good) / wall,
        # above 1 when the server fell behind and its outputs coalesced: fewer events to write
        "tokens_per_event": round(
            sum(r["tokens"] for r in ok) / max(1, sum(len(r["stamps"]) for r in ok)), 3
        ),
    }
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        for q in (50, 90, 99):
            v = pct(values, q)
            out[f"{name}_p{q}_ms"] = None if v is None else round(1e3 * v, 2)
    return out
