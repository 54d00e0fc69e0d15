"""The drift-quality benchmark's pool: templated BIG-bench prompts and real model responses.

Task inputs are split in two by a hash of the input text: the baseline's prompts use one half,
every window's prompts the other, so no window repeats a baseline prompt. Parts of the pool:

- `base`: the served model on the usual templates (the baseline);
- `held`: the served model on the usual templates, window inputs (unchanged traffic);
- `reworded`: the served model on the reworded templates, window inputs;
- `sibling`: the sibling model on the `held` prompts (a quiet model swap).

Responses come from the project's engine on the CPU (SmolLM2-135M-Instruct from the shipped
GGUF, sampled at temperature 0.7 with a seed per request), with the fields the traffic logger
records: token counts, finish reason, mean log-probability and entropy. Latency is left out:
on a shared machine it measures the neighbours, not the model. Each part is cached as JSONL.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.workloads.bigbench_tasks import Example
from bench.workloads.drift_quality_apps import Template, all_templates, reworded_templates, task_app

MAX_TOKENS = 16
TEMPERATURE = 0.7
CHUNK = 32


def split_of(text: str) -> int:
    """0 (baseline inputs) or 1 (window inputs), stable across runs and machines."""
    return hashlib.sha256(text.encode()).digest()[0] & 1


def inputs_by_app(tasks: dict[str, list[Example]], split: int) -> dict[str, list[Example]]:
    apps = task_app()
    out: dict[str, list[Example]] = {}
    for task, examples in sorted(tasks.items()):
        out.setdefault(apps[task], []).extend(e for e in examples if split_of(e.input) == split)
    return out


def draw_prompts(
    tasks: dict[str, list[Example]],
    n: int,
    *,
    split: int,
    seed: int,
    templates: list[Template] | None = None,
    reworded: bool = False,
) -> list[dict]:
    """`n` prompts: a template by traffic share, then one of its app's inputs at random.
    Prefix-stable: the first k of `n` prompts are the `k` prompts of the same seed."""
    rng, pick_input = np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])
    pool = inputs_by_app(tasks, split)
    temps = templates or all_templates()
    shares = np.asarray([t.share for t in temps])
    picks = rng.choice(len(temps), size=n, p=shares / shares.sum())
    rows = []
    for k in picks:
        t = temps[int(k)]
        ex = pool[t.app][int(pick_input.integers(len(pool[t.app])))]
        rows.append(
            {
                "prompt": t.render(ex.input, reworded=reworded),
                "app": t.app,
                "template": t.name,
                "reworded": reworded,
                "task": ex.task,
                "input": ex.input,
                "answer": ex.answer,
            }
        )
    return rows


def part_prompts(tasks: dict[str, list[Example]], sizes: dict[str, int]) -> dict[str, list[dict]]:
    """The prompts of each model-A part; `sibling` reuses `held`'s prompts."""
    per_reworded = sizes["reworded"] // len(reworded_templates())
    reworded = []
    for i, t in enumerate(reworded_templates()):
        reworded += draw_prompts(
            tasks, per_reworded, split=1, seed=300 + i, templates=[t], reworded=True
        )
    return {
        "base": draw_prompts(tasks, sizes["base"], split=0, seed=100),
        "held": draw_prompts(tasks, sizes["held"], split=1, seed=200),
        "reworded": reworded,
    }


class Generator:
    """The engine on the CPU, one model; `generate` keeps the records' order."""

    def __init__(self, loaded, threads: int = 2, device: str = "cpu") -> None:
        import torch

        from serving.engine import EngineConfig, build_engine

        torch.set_num_threads(threads)
        cfg = EngineConfig(device=device, kv_cache_memory_mb=512, max_num_seqs=CHUNK)
        self.engine = build_engine(cfg, loaded=loaded)
        self.tok = self.engine.tokenizer

    def generate(self, rows: list[dict], seed0: int) -> list[dict]:
        from serving.sampling_params import SamplingParams

        for i, row in enumerate(rows):
            chat = [{"role": "user", "content": row["prompt"]}]
            ids = self.tok.encode(self.tok.apply_chat_template(chat, add_generation_prompt=True))
            params = SamplingParams(max_tokens=MAX_TOKENS, temperature=TEMPERATURE, seed=seed0 + i)
            self.engine.add_request(str(i), ids, params)
            row["prompt_tokens"] = len(ids)
        while self.engine.has_unfinished_requests():
            for out in self.engine.step():
                if not out.finished:
                    continue
                row, choice = rows[int(out.request_id)], out.outputs[0]
                row.update(
                    response=choice.text,
                    completion_tokens=len(choice.token_ids),
                    finish_reason=choice.finish_reason,
                    mean_logprob=choice.mean_logprob,
                    mean_entropy=choice.mean_entropy,
                )
        return rows


def generate_part(
    path: Path, rows: list[dict], make_generator: Callable[[], Generator], seed0: int
) -> list[dict]:
    """The part's records, generated in chunks appended to `path` (a rerun resumes)."""
    done = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    if len(done) >= len(rows):
        return done[: len(rows)]
    gen = make_generator()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for lo in range(len(done), len(rows), CHUNK):
            t0 = time.perf_counter()
            chunk = gen.generate([dict(r) for r in rows[lo : lo + CHUNK]], seed0 + lo)
            out.writelines(json.dumps(r) + "\n" for r in chunk)
            out.flush()
            done += chunk
            rate = len(chunk) / (time.perf_counter() - t0)
            print(f"  {path.stem}: {len(done)}/{len(rows)} ({rate:.2f} responses/s)", flush=True)
    return done
