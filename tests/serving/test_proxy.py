"""`vigil proxy` in front of a fake upstream, driven by the official `openai` client and raw
httpx over loopback: bytes forwarded unchanged, the upstream's errors passed through with their
status, the upstream key instead of the client's, finished requests sampled, a client that
leaves cutting its upstream stream off."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from fake_upstream import WORDS, ListSink
from sidecar_servers import UvicornThread, free_port

from serving.proxy.main import build_proxy
from vigil.config import load_settings

CLIENT_KEY = "proxy-client-key-0123456789"
UPSTREAM_KEY = "upstream-secret-key-0123456789"
CHAT = [
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": "Where is the cat?"},
]


def proxy_for(upstream_url: str, tmp_path, **overrides):
    settings = load_settings(
        database_url=f"sqlite:///{tmp_path}/p.db",
        api_keys=[CLIENT_KEY],
        proxy_upstream_url=upstream_url,
        proxy_upstream_api_key=UPSTREAM_KEY,
        sample_rate=1.0,
        **overrides,
    )
    sink = ListSink()
    app = build_proxy(settings, writer=sink, sampler_seed=0)
    return app, sink


@pytest.fixture
def proxy(upstream, tmp_path):
    app, sink = proxy_for(upstream.url, tmp_path)
    with UvicornThread(app) as server:
        server.sink, server.app = sink, app
        yield server


def records(proxy, n: int, timeout: float = 5.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while len(proxy.sink.records) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return proxy.sink.records


def client(proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0)


def test_chat_is_relayed_with_the_upstream_key_and_sampled(proxy, upstream):
    r = client(proxy).chat.completions.create(model="up-model", messages=CHAT)
    assert r.choices[0].message.content == "".join(WORDS) and r.usage.completion_tokens == len(
        WORDS
    )
    assert upstream.seen_auth == [f"Bearer {UPSTREAM_KEY}"]  # never the client's key
    [record] = records(proxy, 1)
    assert record["prompt"] == "Be terse.\nWhere is the cat?" and record["response"] == "".join(
        WORDS
    )
    assert (record["prompt_tokens"], record["completion_tokens"], record["finish_reason"]) == (
        12,
        7,
        "stop",
    )
    assert record["model_version"] == "up-model" and record["source"] == "proxy"
    assert record["ttft_ms"] is None and record["latency_ms"] > 0


def test_a_stream_arrives_byte_for_byte_as_it_is_produced(proxy, upstream):
    upstream.delay_s = 0.05
    body = {
        "model": "up-model",
        "messages": CHAT,
        "stream": True,
        "logprobs": True,
        "stream_options": {"include_usage": True},
    }
    arrivals = []
    with httpx.stream(
        "POST",
        f"{proxy.url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {CLIENT_KEY}"},
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = b""
        for piece in r.iter_raw():
            raw += piece
            arrivals.append(time.monotonic())
    assert raw == upstream.last_stream
    assert arrivals[-1] - arrivals[0] > 0.25  # relayed as produced, not gathered at the end
    [record] = records(proxy, 1)
    assert record["response"] == "".join(WORDS) and record["completion_tokens"] == 7
    assert record["mean_logprob"] == pytest.approx(-0.5)
    assert record["ttft_ms"] >= 40 and record["tpot_ms"] == pytest.approx(50, rel=0.5)


def test_the_openai_client_streams_through_the_proxy(proxy, upstream):
    stream = client(proxy).chat.completions.create(model="up-model", messages=CHAT, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "".join(WORDS)
    [record] = records(proxy, 1)
    assert record["completion_tokens"] == len(WORDS)  # no usage asked for: counted from events


@pytest.mark.parametrize(
    ("mode", "error", "status", "message"),
    [
        ("429", openai.RateLimitError, 429, "slow down"),
        ("500", openai.InternalServerError, 500, "upstream exploded"),
    ],
)
def test_upstream_errors_pass_through_with_their_status(
    proxy, upstream, mode, error, status, message
):
    upstream.mode = mode
    with pytest.raises(error) as caught:
        client(proxy).chat.completions.create(model="up-model", messages=CHAT)
    assert caught.value.status_code == status and caught.value.body["message"] == message
    if status == 429:
        assert caught.value.response.headers["retry-after"] == "7"
        assert caught.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    time.sleep(0.2)
    assert proxy.sink.records == []  # failed requests are not sampled


def test_an_upstream_that_breaks_off_mid_stream_breaks_the_client_stream(proxy, upstream):
    upstream.mode = "break"
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        for _ in client(proxy).chat.completions.create(
            model="up-model", messages=CHAT, stream=True
        ):
            pass
    time.sleep(0.2)
    assert proxy.sink.records == []


def test_a_client_that_leaves_aborts_the_upstream_stream(proxy, upstream):
    upstream.delay_s = 0.5  # 8 events: 4 s unless cut off
    with httpx.stream(
        "POST",
        f"{proxy.url}/v1/chat/completions",
        json={"model": "m", "messages": CHAT, "stream": True},
        headers={"Authorization": f"Bearer {CLIENT_KEY}"},
    ) as r:
        next(r.iter_raw())
    assert upstream.aborted.wait(3), "the upstream kept generating for a client that left"
    assert not upstream.finished.is_set()


def test_models_keys_and_unknown_paths(proxy, upstream):
    assert [m.id for m in client(proxy).models.list()] == ["up-model"]
    assert (
        httpx.get(f"{proxy.url}/v1/models").status_code == 401
    )  # no key: refused before the upstream
    wrong = httpx.get(f"{proxy.url}/v1/models", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]
    assert upstream.seen_auth == [f"Bearer {UPSTREAM_KEY}"]
    missing = httpx.post(
        f"{proxy.url}/v1/embeddings", json={}, headers={"Authorization": f"Bearer {CLIENT_KEY}"}
    )
    assert missing.status_code == 404 and missing.json()["error"]["message"]
    assert httpx.get(f"{proxy.url}/health").status_code == 200


def test_an_unreachable_upstream_is_a_502(tmp_path):
    app, sink = proxy_for(f"http://127.0.0.1:{free_port()}", tmp_path)
    with UvicornThread(app) as server:
        r = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"model": "m", "messages": CHAT},
            headers={"Authorization": f"Bearer {CLIENT_KEY}"},
        )
    assert r.status_code == 502 and "cannot connect" in r.json()["error"]["message"]


def test_the_client_key_is_forwarded_only_when_configured(upstream, tmp_path):
    app, _ = proxy_for(upstream.url, tmp_path, proxy_forward_client_key=True)
    with UvicornThread(app) as server:
        client(server).models.list()
    assert upstream.seen_auth == [f"Bearer {CLIENT_KEY}"]


def test_an_operator_key_never_reaches_the_upstream(upstream, tmp_path):
    """The sidecar's judge and canaries call the proxy with Vigil's own operator key (as in
    `vigil up --proxy`); with client keys forwarded, that key still stays inside Vigil."""
    operator_key = "vigil-operator-key-0123456789"
    app, _ = proxy_for(
        upstream.url, tmp_path, proxy_forward_client_key=True, operator_keys=[operator_key]
    )
    with UvicornThread(app) as server:
        openai.OpenAI(
            base_url=server.url + "/v1", api_key=operator_key, max_retries=0
        ).models.list()
        client(server).models.list()
    assert upstream.seen_auth == [f"Bearer {UPSTREAM_KEY}", f"Bearer {CLIENT_KEY}"]
