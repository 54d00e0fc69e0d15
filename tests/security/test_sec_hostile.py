"""The hostile-input suite: both real servers (uvicorn on 127.0.0.1) under schemathesis cases
(positive and negative, with and without a key) and a corpus of adversarial payloads (oversized,
chunked and trickled bodies, deep JSON, huge numbers, special tokens, regex bombs, stalled
stream readers, forged cookies and proxy headers). Never a 5xx, never a page read without
credentials, engine memory bounded. Counts are printed (`pytest -s`).

The engine runs with a model-free fake behind the real HTTP stack (a real byte-level ChatML
tokenizer, the real guard, routes, validation, SSE and buffering): the HTTP layer is what is
under test, and the fake keeps the suite within seconds."""

from __future__ import annotations

import json
import socket
import time

import httpx
import schemathesis
from hostile_corpus import Tally, declared_length, json_bodies, rss_mb, slow_body, streamed_oversize
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from page_world import seed_alert
from schemathesis import GenerationMode
from sec_fakes import ADMIN_KEY, API_KEY, MODEL, TENANT_KEY, FakeEngine, tiny_chatml_tokenizer
from sidecar_servers import UvicornThread

from serving.server.base.state import Phase
from serving.server.service.app import create_app as create_engine_app
from sidecar.app import create_app as create_sidecar_app
from storage.db import session_factory
from vigil.config import load_settings

AUTH = {"Authorization": f"Bearer {API_KEY}"}
# everything else on the sidecar shows monitoring data and must need credentials
PUBLIC = {
    "/health",
    "/login",
    "/favicon.ico",
    "/openapi.json",
    "/docs",
    "/redoc",
    "/docs/oauth2-redirect",
}
ENGINE_PUBLIC = PUBLIC | {"/metrics"}  # Prometheus scrapes the engine without a key: counts only
EXAMPLES = 8  # per operation and mode: the whole suite stays under two minutes


def fuzz(
    schema,
    base_url: str,
    tally: Tally,
    headers: dict[str, str],
    *,
    unauthenticated: bool,
    public: set[str] = PUBLIC,
) -> None:
    modes = (
        [GenerationMode.POSITIVE]
        if unauthenticated
        else [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    )
    for result in schema.get_all_operations():
        for mode in modes:
            _fuzz_operation(result.ok(), mode, base_url, tally, headers, unauthenticated, public)


def _fuzz_operation(
    operation,
    mode,
    base_url: str,
    tally: Tally,
    headers: dict[str, str],
    unauthenticated: bool,
    public_paths: set[str],
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case) -> None:
        if unauthenticated:  # whatever the case generated, no credentials go out
            case.headers = {
                k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"
            }
        response = case.call(base_url=base_url, headers=dict(headers), timeout=30)
        label = f"{case.method} {case.formatted_path} ({mode.value})"
        tally.record(label, response.status_code)
        public = case.formatted_path in public_paths
        if unauthenticated and not public and response.status_code == 200:
            tally.unauthenticated_reads.append(label)

    try:
        check()
    except Unsatisfiable:  # nothing to make invalid (an operation without parameters)
        assert mode is GenerationMode.NEGATIVE


def engine_server(tally_engine: FakeEngine):
    cfg = load_settings(
        api_keys=[API_KEY],
        model_name=MODEL,
        sample_rate=0.0,
        segment_min_per_hour=0,
        max_request_bytes=256 * 1024,
        body_timeout_s=1.0,
    )
    app = create_engine_app(cfg, engine=tally_engine, log_traffic=False)
    app.state.vigil.phase = Phase.READY  # UvicornThread runs without the lifespan
    return app


def stalled_stream_growth_mb(port: int) -> float:
    """Open a long SSE stream and read nothing: RSS growth while the engine keeps producing."""
    body = json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "go"}],
            "stream": True,
            "max_tokens": 10,
        }
    ).encode()
    before = rss_mb()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {API_KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(3.0)  # the fake engine produces 4,000 steps of growing text meanwhile
        return rss_mb() - before


def test_engine_survives_hostile_input():
    engine = FakeEngine(tokenizer=tiny_chatml_tokenizer())
    tally = Tally("engine")
    app = engine_server(engine)
    with UvicornThread(app) as server:
        url = server.url
        schema = schemathesis.openapi.from_dict(app.openapi())  # cases go over real HTTP
        warm = httpx.post(
            f"{url}/v1/chat/completions",
            headers=AUTH,
            timeout=30,  # lazy imports (torch)
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert warm.status_code == 200
        tally.rss_start_mb = rss_mb()  # growth is measured from a warm server
        fuzz(schema, url, tally, AUTH, unauthenticated=False)
        fuzz(schema, url, tally, {}, unauthenticated=True, public=ENGINE_PUBLIC)
        with httpx.Client(base_url=url, timeout=30) as client:
            for name, body in json_bodies(MODEL).items():
                for path in ("/v1/chat/completions", "/v1/completions"):
                    r = client.post(
                        path, content=body, headers={**AUTH, "Content-Type": "application/json"}
                    )
                    tally.record(f"{name} {path}", r.status_code)
                    anonymous = client.post(
                        path, content=body, headers={"Content-Type": "application/json"}
                    )
                    tally.record(f"{name} {path} (no key)", anonymous.status_code)
                    assert anonymous.status_code == 401, name
        for headers in (
            {},
            AUTH,
            {"Authorization": "Bearer " + "k" * 60_000},
            {"Authorization": "Basic Zm9v"},
        ):
            status = declared_length(server.port, "/v1/chat/completions", headers, 10**12)
            tally.record("declared 1 TB", status)
            assert status in (401, 413, 431), status
        for headers in ({}, AUTH):
            status = streamed_oversize(
                f"{url}/v1/chat/completions", {**headers, "Content-Type": "application/json"}, 64
            )
            tally.record("64 MB chunked", status or 413)
            assert status in (0, 401, 413)
        status, took = slow_body(
            server.port, "/v1/chat/completions", {**AUTH, "Content-Type": "application/json"}, 6.0
        )
        tally.record("slowloris body", status)
        assert status == 408 and took < 4.0
        engine.steps, engine.piece = 4_000, "y" * 64
        tally.rss_peak_mb = max(
            tally.rss_peak_mb, tally.rss_start_mb + stalled_stream_growth_mb(server.port)
        )
        tally.record("stalled SSE reader", 200)
    print("\n" + tally.summary())
    assert tally.server_errors == [], tally.server_errors[:10]
    assert tally.codes[400] > tally.tried / 3
    assert tally.rss_growth_mb < 200, tally.summary()


def test_sidecar_survives_hostile_input(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    seed_alert(
        factory,
        dead_delivery={
            "target": "https://hooks.slack.com/services/T/B/SECRET",
            "last_error": "boom",
        },
    )
    cfg = make_settings(
        migrated_db,
        api_keys=[API_KEY],
        tenant_keys={TENANT_KEY: "acme"},
        admin_keys=[ADMIN_KEY],
        ingest_max_bytes=200_000,
        ingest_max_samples=50,
        body_timeout_s=1.0,
        trusted_proxies=["10.0.0.0/8"],
        forward_auth_header="X-Forwarded-User",
    )
    app = create_sidecar_app(cfg, factory)
    tally = Tally(f"sidecar/{migrated_db.split(':')[0]}")
    with UvicornThread(app) as server:
        url = server.url
        schema = schemathesis.openapi.from_dict(app.openapi())  # cases go over real HTTP
        for path in ("/", "/reports", "/alerts", "/baselines", "/metrics"):  # lazy imports first
            httpx.get(f"{url}{path}", headers=AUTH, timeout=30)
        tally.rss_start_mb = rss_mb()
        fuzz(schema, url, tally, AUTH, unauthenticated=False)
        fuzz(schema, url, tally, {}, unauthenticated=True)
        forged = [
            {},
            {"Cookie": "vigil_session=garbage"},
            {"Cookie": "vigil_session=" + "a" * 30_000},
            {"Cookie": "vigil_session=eHx5.00"},
            {"X-Forwarded-User": "admin"},
            {"Authorization": f"Bearer {TENANT_KEY}"},
            {"Authorization": "Bearer"},
            {"Authorization": "Basic YWRtaW46YWRtaW4="},
            {"Accept": "text/html"},
        ]
        with httpx.Client(base_url=url, timeout=30) as client:
            for headers in forged:
                for path in (
                    "/",
                    "/reports",
                    "/reports/1",
                    "/alerts",
                    "/alerts/1",
                    "/baselines",
                    "/metrics",
                    "/reports/../alerts",
                    "/alerts/1%00",
                    "/reports/99999999999999999999",
                    "/alerts/99999999999999999999",
                    "/alerts/-1",
                ):
                    r = client.get(path, headers=headers)
                    tally.record(f"GET {path} {list(headers)}", r.status_code)
                    if r.status_code == 200:
                        tally.unauthenticated_reads.append(f"{path} with {list(headers)}")
            for body in (
                b"key=" + b"k" * 100_000,
                b"key=%ZZ&next=//evil",
                b"\xff\xfe",
                b"next=" + b"/" * 5000,
            ):
                r = client.post(
                    "/login",
                    content=body,
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
                tally.record("POST /login", r.status_code)
                assert r.status_code in (401, 413) and "vigil_session" not in r.headers.get(
                    "set-cookie", ""
                )
            ingest = {"Content-Type": "application/json"}
            bodies = [
                b"[" * 60_000 + b"]" * 60_000,
                b'{"samples":' + b'{"a":' * 20_000 + b"1" + b"}" * 20_000 + b"}",
                json.dumps({"samples": [{"id": "x", "prompt_tokens": 10**400}]}).encode(),
                json.dumps({"samples": [{"id": "x", "ttft_ms": 1e308}]}).encode(),
                b'{"samples":[{"id":"x","prompt":"\\ud800"}]}',
                b"\xff",
                b"null",
                json.dumps({"samples": [{"id": str(i)} for i in range(10_000)]}).encode()[:199_000],
                json.dumps({"samples": [{"id": "t", "tenant": "globex"}]}).encode(),
            ]
            for body in bodies:
                for headers in (AUTH, {"Authorization": f"Bearer {TENANT_KEY}"}, {}):
                    r = client.post("/v1/ingest", content=body, headers={**ingest, **headers})
                    tally.record("POST /v1/ingest", r.status_code)
                    if not headers:
                        assert r.status_code == 401
        status = streamed_oversize(
            f"{url}/v1/ingest", {**AUTH, "Content-Type": "application/json"}, 16
        )
        tally.record("16 MB chunked ingest", status or 413)
        status, took = slow_body(
            server.port, "/v1/ingest", {**AUTH, "Content-Type": "application/json"}, 6.0
        )
        tally.record("slowloris ingest", status)
        assert status == 408 and took < 4.0
    print("\n" + tally.summary())
    assert tally.server_errors == [], tally.server_errors[:10]
    assert tally.unauthenticated_reads == [], tally.unauthenticated_reads[:10]
