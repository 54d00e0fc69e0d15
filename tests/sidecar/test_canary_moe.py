"""Engine canaries over a mixture-of-experts model: a tiny random Qwen3-MoE (8 experts, top-2,
two sparse layers) served over HTTP on loopback.

- The reference text of the perplexity probe routes tokens through every expert of every sparse
  layer. It is the probe that covers experts: its logprob is read at every position, while a
  tokens or chat probe reads only its generated tokens (a last-layer expert that only a prompt
  token reaches changes nothing it reads).
- A wrong expert kernel (the expert the reference text reaches least, computed with the next
  expert's weights: the test-only switch in serving/model/moe_fault.py) fails the first canary
  run after it appears; the healthy engine passes again.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import torch
import uvicorn
from moe_fixtures import qwen3_moe_config, save_tiny_moe
from sidecar_servers import API_KEY, OPERATOR_KEY, free_port

from serving.model import moe, moe_fault
from sidecar.canary.job import client_for, run_canary_job
from sidecar.canary.probes import load_probe_set

MODEL = "tiny-moe"
_g = torch.Generator().manual_seed(7)
PROBES = {
    "version": "test-canary-moe-1",
    "seed": 3,
    "calibration": {"repeats": 2, "fillers": [], "filler_copies": 0},
    "probes": [
        {
            "name": f"tokens-{i}",
            "kind": "tokens",
            "max_tokens": 6,
            "prompt_token_ids": torch.randint(0, 256, (n,), generator=_g).tolist(),
        }
        for i, n in enumerate((5, 21))
    ]
    + [
        {
            "name": "reference",
            "kind": "perplexity",
            "text": "Water boils at one hundred degrees Celsius at sea level. At higher altitudes "
            "the air pressure is lower, so water boils at a lower temperature.",
        }
    ],
}


class TinyMoeServer:
    """The engine's OpenAI app over the tiny MoE checkpoint, under uvicorn with its lifespan."""

    def __init__(self, path) -> None:
        from serving.engine import AsyncLLMEngine, EngineConfig, LLMEngine
        from serving.server.service.app import create_app
        from vigil.config import load_settings

        torch.set_num_threads(1)
        settings = load_settings(
            env="development",
            api_keys=[API_KEY],
            operator_keys=[OPERATOR_KEY],
            model_path=str(path),
            model_name=MODEL,
            max_model_len=256,
            kv_cache_memory_mb=16,
            torch_threads=1,
            sample_rate=0.0,
            segment_min_per_hour=0,
        )
        self.engine = AsyncLLMEngine(LLMEngine(EngineConfig.from_settings(settings)))
        self.engine.start()
        self.port = free_port()
        config = uvicorn.Config(
            create_app(settings, engine=self.engine, log_traffic=False),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline, "engine server did not start"
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        asyncio.run(self.engine.shutdown())


@pytest.fixture(scope="module")
def moe_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("canary_moe")
    # seed 6: the reference text reaches all 8 experts of both sparse layers (asserted below); the
    # routers of random weights favour a few experts, and other seeds leave one unreached
    save_tiny_moe(path, qwen3_moe_config(), seed=6)
    server = TinyMoeServer(path)
    yield server
    server.stop()


@pytest.fixture
def probes_file(tmp_path):
    path = tmp_path / "probes.json"
    path.write_text(json.dumps(PROBES))
    return path


@pytest.fixture(autouse=True)
def no_fault_left_behind():
    yield
    moe_fault.set_expert_fault(None)


def _routed(monkeypatch) -> Counter:
    """Count the (layer, expert) pairs every MoE layer routes to from now on."""
    seen: Counter = Counter()
    real = moe_fault.faulted_ids

    def record(ids, layer, num_experts):
        seen.update((layer, int(e)) for e in ids.reshape(-1).tolist())
        return real(ids, layer, num_experts)

    monkeypatch.setattr(moe, "faulted_ids", record)
    return seen


def test_a_wrong_expert_kernel_fails_the_canaries(
    moe_server, migrated_db, make_settings, probes_file, monkeypatch
):
    from storage.db import session_factory

    settings = make_settings(
        migrated_db, engine_url=moe_server.url, model_name=MODEL, canary_probes_path=probes_file
    )
    factory = session_factory(migrated_db)
    t0 = datetime.now(UTC) - timedelta(minutes=10)
    first = run_canary_job(settings, factory, t0)
    assert first.status == "calibration", first
    healthy = run_canary_job(settings, factory, t0 + timedelta(minutes=1))
    assert healthy.status == "ok", healthy

    routed = _routed(monkeypatch)
    probe_set = load_probe_set(probes_file)
    with client_for(settings, probe_set) as client:
        client.run(next(p for p in probe_set.probes if p.kind == "perplexity"))
    # every expert of both sparse layers reads reference tokens: a fault in any is visible
    assert {(layer, e) for layer in (0, 2) for e in range(8)} <= set(routed)

    layer, expert = min(routed, key=lambda key: routed[key])  # the hardest expert to catch
    moe_fault.set_expert_fault(layer, expert)
    faulty = run_canary_job(settings, factory, t0 + timedelta(minutes=2))
    assert faulty.status == "mismatch" and "reference" in faulty.failed + faulty.critical, faulty

    moe_fault.set_expert_fault(None)
    recovered = run_canary_job(settings, factory, t0 + timedelta(minutes=3))
    assert recovered.status == "ok", recovered
