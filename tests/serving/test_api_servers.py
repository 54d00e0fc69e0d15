"""`vigil serve --api-server-count 2` on a tiny model: both API processes serve the one port and
the one engine core; the `openai` client gets the same greedy completions as a single server;
/metrics adds up both processes; a killed core fails the streams of both processes and they
recover; SIGTERM drains both and leaves no process behind; N > 1 needs a separate core."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import openai
import pytest
from core_fixtures import tiny_model_dir
from multi_server_support import (
    AUTH,
    KEY,
    MODEL,
    MultiServer,
    completion_total,
    free_port,
    gone,
    served_by,
    streams_in_both,
)
from test_metrics_vllm_names import DASHBOARD_QUERIES, samples
from test_server_support import ServerThread, make_settings, wait_for

PROMPTS = ["The quick brown fox", "1, 2, 3,", "Hello"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("api-servers-model"))


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    srv = MultiServer(
        tmp_path_factory.mktemp("api-servers"), model_dir, count=2, VIGIL_SAMPLE_RATE="1.0"
    )
    try:
        srv.wait_healthy()
        yield srv
    finally:
        srv.stop()


def _completions(base_url: str) -> list[tuple[str, str]]:
    """(non-streamed, streamed) greedy text per prompt, through the official client."""
    client = openai.OpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    out = []
    for prompt in PROMPTS:
        kw = dict(model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
        plain = client.completions.create(**kw)
        assert plain.choices[0].finish_reason == "length" and plain.usage.completion_tokens == 12
        streamed = "".join(
            c.choices[0].text for c in client.completions.create(stream=True, **kw) if c.choices
        )
        out.append((plain.choices[0].text, streamed))
    return out


def _one_server_completions(model_dir) -> list[tuple[str, str]]:
    from serving.engine import AsyncLLMEngine, EngineConfig, LLMEngine
    from serving.server.service.app import create_app

    settings = make_settings(
        model_path=str(model_dir),
        model_name=MODEL,
        device="cpu",
        api_keys=[KEY],
        kv_cache_memory_mb=16,
        max_model_len=None,
    )
    engine = AsyncLLMEngine(LLMEngine(EngineConfig.from_settings(settings)))
    engine.start()
    try:
        with ServerThread(create_app(settings, engine=engine, log_traffic=False)) as srv:
            return _completions(srv.url)
    finally:
        asyncio.run(engine.shutdown())


def _fresh_get(url: str, **kw) -> httpx.Response:
    with httpx.Client(timeout=30) as client:  # a new connection: the kernel picks the process
        return client.get(url, **kw)


def _fresh_post(url: str, **kw) -> httpx.Response:
    with httpx.Client(timeout=60) as client:
        return client.post(url, **kw)


def test_both_processes_serve_the_same_greedy_completions_as_one_server(server, model_dir):
    texts = _completions(server.url)
    assert all(plain == streamed and plain for plain, streamed in texts)
    assert texts == _one_server_completions(model_dir)
    body = {"model": MODEL, "prompt": PROMPTS[0], "max_tokens": 12, "temperature": 0}
    seen: dict[int, str] = {}
    for _ in range(200):  # until both processes answered (accepts can run to one for a while)
        r = _fresh_post(server.url + "/v1/completions", json=body, headers=AUTH)
        assert r.status_code == 200
        seen[served_by(r)] = r.json()["choices"][0]["text"]
        if len(seen) == 2:
            break
    assert sorted(seen) == sorted(server.api_pids())  # both processes answered, and alike
    assert set(seen.values()) == {texts[0][0]}


def test_metrics_count_every_request_once_over_both_processes(server):
    def scrape() -> tuple[int, str]:
        r = _fresh_get(server.url + "/metrics")
        assert r.status_code == 200
        return served_by(r), r.text

    def sampled(text: str) -> float:
        from prometheus_client.parser import text_string_to_metric_families

        (family,) = [
            f for f in text_string_to_metric_families(text) if f.name == "vigil:requests_sampled"
        ]
        return sum(s.value for s in family.samples)

    before = completion_total(scrape()[1])
    # the kernel hands each new connection to whichever process accepts first: under load one
    # may take a long run of them, so requests go on until both have answered some
    k, servers = 0, set()
    body = {"model": MODEL, "prompt": "metrics", "max_tokens": 3, "temperature": 0}
    while k < 8 or (len(servers) < 2 and k < 200):
        r = _fresh_post(server.url + "/v1/completions", json=body, headers=AUTH)
        assert r.status_code == 200
        servers.add(served_by(r))
        k += 1
    assert len(servers) == 2, f"all {k} requests went to one process: the sum is not tested"
    scraped_by = set()
    for _ in range(200):
        pid, text = scrape()
        scraped_by.add(pid)
        assert completion_total(text) == before + k  # whichever process answers, both counted
        if len(scraped_by) == 2:
            break
    assert len(scraped_by) == 2
    exposed = samples(text)  # the multiprocess export keeps vLLM's names and labels
    assert not [name for name in DASHBOARD_QUERIES if name not in exposed]
    assert all(s.labels.get("model_name") == MODEL for group in exposed.values() for s in group)
    # sample rate 1: each process's traffic sampler kept every request it finished, and its
    # counter reaches the shared files within a second
    totals: list[tuple[float, float]] = []

    def sampled_all() -> bool:
        text = scrape()[1]
        totals.append((sampled(text), completion_total(text)))
        return totals[-1][0] == totals[-1][1]

    assert wait_for(sampled_all, timeout=10), totals[-3:]


def test_killed_core_fails_streams_in_both_processes_then_both_recover(server):
    streams = streams_in_both(server.url, server.api_pids(), max_tokens=900)
    old_core = server.core_pid()
    import os
    import signal

    os.kill(old_core, signal.SIGKILL)
    for s in streams:
        s.join(30)
        assert s.status == 200 and s.done and s.finish != "length", (s.text, s.finish)
        assert s.error is not None and s.error["code"] == "engine_dead", s.error
    # the processes that answer in the meantime say so, then both are back
    late = _fresh_get(server.url + "/health")
    assert late.status_code in (503, 200)
    assert wait_for(lambda: server.core_pid() != old_core, timeout=60), server.log()
    assert wait_for(server.healthy, timeout=60, interval=0.2)
    healthy_pids = set()
    for _ in range(200):  # until both processes answered (accepts can run to one for a while)
        r = _fresh_get(server.url + "/health")
        assert r.status_code == 200, r.text
        healthy_pids.add(served_by(r))
        if len(healthy_pids) == 2:
            break
    assert healthy_pids == set(server.api_pids())
    body = {"model": MODEL, "prompt": "again", "max_tokens": 5, "temperature": 0}
    r = _fresh_post(server.url + "/v1/completions", json=body, headers=AUTH)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 5


def test_health_is_503_in_every_process_while_the_core_is_down(server):
    import os
    import signal

    server.wait_healthy()
    os.kill(server.core_pid(), signal.SIGKILL)
    down: set[int] = set()

    def both_down() -> bool:
        r = _fresh_get(server.url + "/health")
        if r.status_code == 503:
            down.add(served_by(r))
        return len(down) == 2

    assert wait_for(both_down, timeout=15), down  # a restart takes seconds: both say 503 first
    server.wait_healthy(60)


def test_sigterm_drains_streams_in_both_processes_exits_0_and_leaves_no_process(
    tmp_path, model_dir
):
    srv = MultiServer(tmp_path, model_dir, count=2)
    try:
        srv.wait_healthy()
        pids = [srv.proc.pid, srv.core_pid(), *srv.api_pids()]
        streams = streams_in_both(srv.url, srv.api_pids(), max_tokens=300)
        srv.proc.send_signal(__import__("signal").SIGTERM)
        for s in streams:
            s.join(60)
            assert s.status == 200 and s.done and s.error is None and s.finish == "length", (
                s.error,
                s.finish,
            )
        assert srv.proc.wait(timeout=60) == 0, srv.log()
        assert wait_for(lambda: all(gone(p) for p in pids), timeout=15), [
            p for p in pids if not gone(p)
        ]
    finally:
        srv.stop()


def test_several_api_servers_need_a_separate_engine_core(monkeypatch, capsys):
    from vigil.cli.main import main
    from vigil.config import ConfigError, load_settings

    with pytest.raises(
        ConfigError, match="VIGIL_API_SERVER_COUNT=2 needs VIGIL_ENGINE_PROCESS=separate"
    ):
        load_settings(api_server_count=2, engine_process="inprocess")
    assert load_settings(api_server_count=2).api_server_count == 2
    assert load_settings(engine_process="inprocess").api_server_count == "auto"
    monkeypatch.setenv("VIGIL_ENGINE_PROCESS", "inprocess")
    assert main(["serve", "--api-server-count", "3"]) == 2
    assert "VIGIL_API_SERVER_COUNT=3 needs VIGIL_ENGINE_PROCESS=separate" in capsys.readouterr().err


def test_a_burst_of_connections_is_spread_over_the_processes(tmp_path, model_dir):
    """Each API process listens on its own SO_REUSEPORT socket: 128 connections opened at once
    spread by address hash (32 each expected; one shared socket gave 29/29/4/2 of 64)."""
    four = MultiServer(tmp_path, model_dir, count=4)
    try:
        four.wait_healthy()
        body = {"model": MODEL, "prompt": "x", "max_tokens": 2, "temperature": 0}

        async def one() -> int:
            async with httpx.AsyncClient(timeout=60) as client:
                r = await client.post(four.url + "/v1/completions", json=body, headers=AUTH)
                assert r.status_code == 200
                return served_by(r)

        async def burst() -> list[int]:
            return await asyncio.gather(*[one() for _ in range(128)])

        counts = Counter(asyncio.run(burst()))
        assert sorted(counts) == sorted(four.api_pids())
        assert min(counts.values()) >= 12, counts  # below 12 of 128: p < 1e-4 per process
    finally:
        assert four.stop() == 0, four.log()


def test_each_process_gets_its_own_socket_and_a_port_in_use_is_refused():
    import socket

    from serving.server.processes.multi_process import bind_listeners

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(OSError):
            bind_listeners("127.0.0.1", port, 2)
        group = bind_listeners("127.0.0.1", free_port(), 3)
        try:
            # one socket of its own per API process, all on one port, spread by the kernel
            assert len({sock.fileno() for sock in group}) == 3
            assert len({sock.getsockname() for sock in group}) == 1
            assert all(sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) for sock in group)
            # another Vigil's group on a port: a second one cannot join it
            with pytest.raises(OSError):
                bind_listeners("127.0.0.1", group[0].getsockname()[1], 2)
        finally:
            for sock in group:
                sock.close()
    finally:
        taken.close()


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
