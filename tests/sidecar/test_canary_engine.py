"""Engine canaries against the real SmolLM2 engine served over HTTP on loopback.

- A deliberate numeric fault (one layer's attention scale off by 5 %, the test-only switch in
  serving/attention/fault.py) is caught by the first canary run after it appears and raises an
  `engine` alert that a real webhook receiver gets, signed; a large fault is critical; the
  healthy engine resolves it again. The sidecar's /metrics shows the canary gauges.
- The unmodified engine raises nothing over 20 canary runs, alone and under concurrent load.

Probes are few and short (the CPU engine makes ~15 tokens/s per stream).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import uvicorn
from sidecar_servers import API_KEY, OPERATOR_KEY, UvicornThread, WebhookReceiver, free_port
from sqlalchemy import select

from alerts.signing import verify
from alerts.worker import DeliveryWorker
from serving.attention.fault import set_scale_fault
from sidecar.app import create_app as create_sidecar_app
from sidecar.canary.job import run_canary_job
from storage.db import session_factory
from storage.migrate import upgrade
from storage.models import Alert, CanaryRun

SECRET = "canary-webhook-secret-0123456789"
PROBES = {
    "version": "test-canary-1",
    "seed": 11,
    "calibration": {
        "repeats": 2,
        "fillers": ["Write a short poem about the sea."],
        "filler_copies": 3,
    },
    "probes": [
        {
            "name": "chat-short",
            "kind": "chat",
            "max_tokens": 4,
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
        },
        # 20 tokens: past one 16-token KV block
        {
            "name": "tokens-past-block",
            "kind": "tokens",
            "max_tokens": 4,
            "prompt_token_ids": [
                6403,
                1980,
                253,
                655,
                28,
                281,
                253,
                1165,
                6560,
                411,
                260,
                3426,
                28,
                665,
                4161,
                354,
                1573,
                43663,
                617,
                897,
            ],
        },
        {
            "name": "reference",
            "kind": "perplexity",
            "text": "Water boils at one hundred degrees Celsius at sea level. At higher altitudes "
            "the air pressure is lower, so water boils at a lower temperature.",
        },
    ],
}


class EngineServer:
    """The engine's OpenAI app over a real SmolLM2 engine, under uvicorn with its lifespan."""

    def __init__(self) -> None:
        import torch

        from serving.engine import AsyncLLMEngine, EngineConfig, LLMEngine
        from serving.server.service.app import create_app
        from vigil.config import load_settings

        torch.set_num_threads(1)  # the cores are shared with other test processes
        # the sidecar's canaries call with the operator key (their requests are marked internal)
        settings = load_settings(
            env="development",
            api_keys=[API_KEY],
            operator_keys=[OPERATOR_KEY],
            max_model_len=512,
            kv_cache_memory_mb=64,
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
def engine_server():
    server = EngineServer()
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
    set_scale_fault(None)


def _deliveries(receiver: WebhookReceiver, count: int, factory, settings) -> list[dict]:
    worker = DeliveryWorker(factory, settings=settings).start()
    try:
        deadline = time.monotonic() + 30
        while len(receiver.received) < count and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.stop()
    bodies = []
    for _path, headers, raw in receiver.received:
        verify(raw, headers, SECRET)
        bodies.append(json.loads(raw))
    return bodies


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["postgresql"], indirect=True)
def test_fault_is_caught_in_one_run_and_alerts_through_a_webhook(
    engine_server, migrated_db, make_settings, probes_file
):
    with WebhookReceiver() as receiver:
        settings = make_settings(
            migrated_db,
            engine_url=engine_server.url,
            canary_probes_path=probes_file,
            webhook_targets=[receiver.url],
            webhook_secret=SECRET,
            delivery_poll_interval_s=0.2,
        )
        factory = session_factory(migrated_db)
        t0 = datetime.now(UTC) - timedelta(minutes=10)  # past: deliveries are due at once
        first = run_canary_job(settings, factory, t0)
        assert first.status == "calibration", first
        healthy = run_canary_job(settings, factory, t0 + timedelta(minutes=1))
        assert healthy.status == "ok", healthy

        set_scale_fault(2, 1.05)  # layer 2's attention scale 5 % off
        faulty = run_canary_job(settings, factory, t0 + timedelta(minutes=2))
        assert faulty.status == "mismatch" and len(faulty.failed) >= 1, faulty
        with factory() as s:
            (alert,) = s.scalars(select(Alert).where(Alert.status == "open")).all()
            assert (alert.rule, alert.kind, alert.severity) == ("canary_mismatch", "engine", "high")
            evidence = alert.evidence
        assert evidence["model_version"] == settings.model_version
        assert (
            evidence["engine"]["device"] == "cpu" and evidence["engine"]["attention"] == "torch_ref"
        )
        assert evidence["engine"]["vigil"] and evidence["engine"]["torch"]
        assert set(evidence["diverging_probes"]) == set(faulty.failed)
        some = evidence["diverging_probes"][faulty.failed[0]]
        assert some["logprob_delta_max"] > 1e-3 and some["reasons"]

        (body,) = _deliveries(receiver, 1, factory, settings)
        text = json.dumps(body)
        assert "canary_mismatch" in text and faulty.failed[0] in text

        set_scale_fault(0, 0.0)  # layer 0 attends uniformly: the reference text's perplexity jumps
        broken = run_canary_job(settings, factory, t0 + timedelta(minutes=3))
        assert broken.critical == ["reference"], broken
        with factory() as s:
            severities = {
                a.rule: a.severity for a in s.scalars(select(Alert).where(Alert.status == "open"))
            }
        assert severities == {"canary_mismatch": "high", "canary_perplexity": "critical"}

        set_scale_fault(None)
        recovered = run_canary_job(settings, factory, t0 + timedelta(minutes=4))
        assert recovered.status == "ok", recovered
        with factory() as s:
            assert s.scalars(select(Alert).where(Alert.status == "open")).all() == []

        with UvicornThread(create_sidecar_app(settings, factory)) as sidecar:
            metrics = httpx.get(
                f"{sidecar.url}/metrics", headers={"Authorization": f"Bearer {API_KEY}"}
            )
        assert metrics.status_code == 200, metrics.text
        lines = metrics.text.splitlines()
        for probe in ("chat-short", "tokens-past-block", "reference"):
            assert f'vigil_canary_token_match_ratio{{probe="{probe}"}} 1.0' in lines
            assert any(
                line.startswith(f'vigil_canary_logprob_delta_max{{probe="{probe}"}}')
                for line in lines
            )
        assert any(line.startswith('vigil_canary_perplexity{probe="reference"}') for line in lines)


def _load(url: str, stop: threading.Event, sent: list[int]) -> None:
    """Chat traffic from two client threads until told to stop."""

    def one(seed: int) -> None:
        with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
            while not stop.is_set():
                http.post(
                    f"{url}/v1/chat/completions",
                    json={
                        "model": "SmolLM2-135M-Instruct",
                        "max_tokens": 8,
                        "temperature": 1.0,
                        "seed": seed,
                        "messages": [
                            {"role": "user", "content": f"Tell me fact number {seed} about owls."}
                        ],
                    },
                )
                sent.append(seed)
                seed += 2

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_healthy_engine_raises_nothing_over_20_runs_alone_and_under_load(
    engine_server, tmp_path, make_settings, probes_file
):
    # SQLite only: 20 runs of the real engine are the cost here; the storage path of the same
    # job is covered on both databases by the fault test
    url = f"sqlite:///{tmp_path / 'canary.db'}"
    upgrade(url)
    settings = make_settings(url, engine_url=engine_server.url, canary_probes_path=probes_file)
    factory = session_factory(url)
    t0 = datetime.now(UTC) - timedelta(hours=1)
    assert run_canary_job(settings, factory, t0).status == "calibration"
    statuses = [
        run_canary_job(settings, factory, t0 + timedelta(minutes=1 + i)).status for i in range(10)
    ]
    stop, sent = threading.Event(), []
    loader = threading.Thread(target=_load, args=(engine_server.url, stop, sent), daemon=True)
    loader.start()
    try:
        time.sleep(0.5)
        statuses += [
            run_canary_job(settings, factory, t0 + timedelta(minutes=20 + i)).status
            for i in range(10)
        ]
    finally:
        stop.set()
        loader.join(120)
    assert statuses == ["ok"] * 20
    assert len(sent) >= 10  # the second half really ran beside other requests
    with factory() as s:
        assert s.scalars(select(Alert)).all() == []
        assert len(s.scalars(select(CanaryRun).where(CanaryRun.status == "ok")).all()) == 20


def test_cli_baseline_then_run_and_exit_codes(
    engine_server, tmp_path, probes_file, monkeypatch, capsys
):
    from vigil.cli.main import main
    from vigil.config import get_settings

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    for name, value in {
        "VIGIL_DATABASE_URL": url,
        "VIGIL_ENGINE_URL": engine_server.url,
        "VIGIL_API_KEYS": json.dumps([API_KEY]),
        "VIGIL_OPERATOR_KEYS": json.dumps([OPERATOR_KEY]),
        "VIGIL_CANARY_PROBES_PATH": str(probes_file),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        assert main(["canary", "run"]) == 1  # nothing to compare with yet
        assert "no canary baseline" in capsys.readouterr().err
        assert main(["canary", "baseline"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert set(shown["tolerances"]) == {"chat-short", "tokens-past-block", "reference"}
        assert shown["noise"]["reference"]["batch_runs"] == 2
        assert main(["canary", "run"]) == 0
        assert json.loads(capsys.readouterr().out)["status"] == "ok"
        set_scale_fault(5, 1.05)
        assert main(["canary", "run"]) == 3
        assert json.loads(capsys.readouterr().out)["status"] == "mismatch"
    finally:
        get_settings.cache_clear()
