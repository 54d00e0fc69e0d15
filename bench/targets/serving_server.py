"""The server under bench_serving: a random-weight model directory of a named shape, `vigil serve`
started as a subprocess (configured through its normal VIGIL_* settings), its /metrics, and the
traffic-logging storage it writes to when sampling is on (a SQLite file in a fresh directory).

The served model and the offline comparison engine load the very same directory, so both run
the same shape and weights.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.workloads.serving_load import KEY
from vigil.devtools.model_shapes import SHAPES

SMOLLM2_VOCAB = 49152  # the default model's, and the tokenizer the GPU runs are given
TOKENIZER_FILES = [
    ("smollm2_tokenizer.json", "tokenizer.json"),
    ("smollm2_tokenizer_config.json", "tokenizer_config.json"),
    ("smollm2_chat_template.jinja", "chat_template.jinja"),
]


def write_random_model(
    out: Path, tokenizer_dir: Path, shape_name: str, device: str, shape: dict | None = None
) -> None:
    """An HF directory of `shape_name` (vigil/devtools/model_shapes.py) with random bf16
    weights (made on `device`; `shape`: a config dict instead of the named one) and the tokenizer
    files from `tokenizer_dir`. Kept between runs: a directory that already holds this shape is
    reused.

    A shape whose vocabulary is larger than the tokenizer's (Qwen3 with SmolLM2's tokenizer) gets
    zero output-embedding rows past the tokenizer: their logit is 0 while the largest of the
    tokenizer's random logits is positive, so greedy decoding only picks tokens that have text
    and every generated token reaches the client as a stream event (the compute is unchanged)."""
    import shutil

    import torch

    from bench.common.hf_random import hf_random_model

    want = {"shape": shape_name, "seed": 0, "tokenizer_vocab": tokenizer_vocab(tokenizer_dir)}
    marker = out / "vigil_bench_shape.json"
    if marker.is_file() and json.loads(marker.read_text()) == want:
        return
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    model = hf_random_model(
        shape or SHAPES[shape_name], seed=0, device="cuda" if device.startswith("cuda") else "cpu"
    )
    with torch.no_grad():
        model.get_output_embeddings().weight[want["tokenizer_vocab"] :] = 0
    model.save_pretrained(out)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the servers need the memory, not this process
    for src, dst in TOKENIZER_FILES:  # a tokenizer dir saved by transformers has the plain names
        for name in (src, dst):
            if (tokenizer_dir / name).is_file():
                shutil.copy(tokenizer_dir / name, out / dst)
                break
    marker.write_text(json.dumps(want))


def tokenizer_vocab(directory: Path) -> int:
    """Token ids the tokenizer in `directory` has text for (added tokens included)."""
    from tokenizers import Tokenizer

    name = "tokenizer.json" if (directory / "tokenizer.json").is_file() else TOKENIZER_FILES[0][0]
    return Tokenizer.from_file(str(directory / name)).get_vocab_size(with_added_tokens=True)


def prompt_vocab(model_dir: str | None, shape_name: str | None) -> int:
    """Prompt ids are drawn below this: inside both the model's and the tokenizer's vocabulary."""
    if model_dir is None or not Path(model_dir).is_dir():
        return SMOLLM2_VOCAB  # the default model, or a GGUF file of it
    if shape_name is None:  # a Hugging Face directory given with --model
        model_vocab = json.loads((Path(model_dir) / "config.json").read_text())["vocab_size"]
        return min(tokenizer_vocab(Path(model_dir)), model_vocab)
    return min(tokenizer_vocab(Path(model_dir)), SHAPES[shape_name]["vocab_size"])


def kv_tokens(shape_name: str | None, kv_cache_mb: int) -> int | None:
    """KV-cache capacity in tokens (bf16), when the shape is known."""
    if shape_name is None:
        return None
    from bench.common.roofline import kv_bytes_per_token

    return kv_cache_mb * 2**20 // kv_bytes_per_token(SHAPES[shape_name])


@dataclass
class Storage:
    """Where a sampling server writes: a fresh SQLite file and journal in their own directory."""

    dir: Path

    @property
    def db(self) -> Path:
        return self.dir / "vigil.db"

    @property
    def journal(self) -> Path:
        return self.dir / "journal"

    def rows(self) -> int:
        """Sample rows committed so far (0 before the migrations made the table)."""
        if not self.db.is_file():
            return 0
        with sqlite3.connect(self.db, timeout=30) as con:
            try:
                return int(con.execute("SELECT count(*) FROM samples").fetchone()[0])
            except sqlite3.OperationalError:  # no table yet
                return 0

    def journal_files(self) -> list[Path]:
        return (
            sorted(p for p in self.journal.rglob("*") if p.is_file())
            if self.journal.is_dir()
            else []
        )

    def wait_rows(self, expected: int, timeout_s: float = 120.0) -> int:
        """Poll until `expected` rows are committed (or the timeout); returns the count seen."""
        deadline = time.monotonic() + timeout_s
        while (n := self.rows()) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
        return n


def server_env(
    args,
    mode: str,
    max_num_seqs: int,
    sample_rate: float,
    storage: Storage,
    api_servers: int | str = 1,  # a count or "auto"
) -> dict:
    env = dict(
        os.environ,
        VIGIL_ENGINE_PROCESS=mode,
        VIGIL_API_SERVER_COUNT=str(api_servers),
        VIGIL_DEVICE=args.device,
        VIGIL_MAX_NUM_SEQS=str(max_num_seqs),
        VIGIL_SAMPLE_RATE=f"{sample_rate:g}",
        VIGIL_SEGMENT_MIN_PER_HOUR="0",
        VIGIL_KV_CACHE_MEMORY_MB=str(args.kv_cache_mb),
        VIGIL_MAX_WAITING_REQUESTS="4096",
        VIGIL_DATABASE_URL=f"sqlite:///{storage.db}",
        VIGIL_JOURNAL_DIR=str(storage.journal),
        VIGIL_API_KEYS=json.dumps([KEY]),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    if args.model:
        env["VIGIL_MODEL_PATH"] = args.model
    if args.torch_threads:
        env["VIGIL_TORCH_THREADS"] = str(args.torch_threads)
    return env


def start_server(
    args,
    mode: str,
    max_num_seqs: int,
    sample_rate: float,
    storage: Storage,
    api_servers: int | str = 1,  # a count or "auto"
) -> subprocess.Popen:
    """`vigil serve` (with `api_servers` API processes) once /health answers 200."""
    cmd = [
        sys.executable,
        "-m",
        "vigil.cli",
        "serve",
        "--port",
        str(args.port),
        "--host",
        "127.0.0.1",
    ]
    log_path = f"{args.log_prefix}-{mode}-api{api_servers}-rate{sample_rate:g}.log"
    with open(log_path, "w") as log:
        env = server_env(args, mode, max_num_seqs, sample_rate, storage, api_servers)
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{args.port}"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if (
            proc.poll() is not None
        ):  # the log's end in the message: a remote run may keep nothing else
            tail = "".join(
                Path(log_path).read_text(errors="replace").splitlines(keepends=True)[-40:]
            )
            raise RuntimeError(
                f"vigil serve exited with {proc.returncode}; the end of {log_path}:\n{tail}"
            )
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("vigil serve did not become healthy in time")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM: the server drains and flushes sampled traffic to storage before it exits."""
    proc.terminate()
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _families(base: str):
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).text
    return text_string_to_metric_families(text)


def sample_metrics(base: str) -> dict[str, float]:
    """The server's traffic-logging counters from /metrics (sampled, logged, journaled, dropped)."""
    names = {
        "vigil:requests_sampled": "sampled",
        "vigil:samples_logged": "logged",
        "vigil:samples_journaled": "journaled",
        "vigil:samples_dropped": "dropped",
    }
    out = {}
    for family in _families(base):
        if family.name in names:
            out[names[family.name]] = sum(
                s.value for s in family.samples if s.name.endswith("_total")
            )
    return out


# the server's own latency histograms: from the request reaching the engine client to its first
# token (and to its first scheduling); client TTFT minus these is HTTP, parsing and streaming
LATENCY_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": "server_ttft",
    "vllm:request_queue_time_seconds": "server_queue",
}


def latency_totals(base: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of each of LATENCY_HISTOGRAMS, over every label set."""
    out = {name: (0.0, 0.0) for name in LATENCY_HISTOGRAMS.values()}
    for family in _families(base):
        if family.name in LATENCY_HISTOGRAMS:
            key = LATENCY_HISTOGRAMS[family.name]
            total = sum(s.value for s in family.samples if s.name.endswith("_sum"))
            count = sum(s.value for s in family.samples if s.name.endswith("_count"))
            out[key] = (total, count)
    return out


def latency_means(before: dict, after: dict) -> dict[str, float | None]:
    """Mean milliseconds of each histogram over what was observed between two latency_totals."""
    out = {}
    for key, (total, count) in after.items():
        n = count - before[key][1]
        out[f"{key}_mean_ms"] = round(1e3 * (total - before[key][0]) / n, 2) if n > 0 else None
    return out
