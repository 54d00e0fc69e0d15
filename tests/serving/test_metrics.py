"""/metrics: vLLM's names and meanings, parsed with prometheus_client's own parser."""

from __future__ import annotations

import httpx
import openai
import pytest
from engine_doubles import EngineClientDouble
from prometheus_client.parser import text_string_to_metric_families
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine

from serving.outputs import CompletionOutput, EngineStats, RequestMetrics, RequestOutput
from serving.server.base.state import Phase
from serving.server.metrics.server_metrics import SampleCounters, ServerMetrics
from serving.server.service.app import create_app

VLLM_COUNTERS = [
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
    "vllm:num_preemptions",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
]
VLLM_GAUGES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"]
VLLM_HISTOGRAMS = [
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
]
VIGIL_COUNTERS = ["vigil:samples_logged", "vigil:samples_journaled", "vigil:samples_dropped"]


def scrape(text: str) -> dict[str, float]:
    """sample name + sorted labels -> value, e.g. 'vllm:prompt_tokens_total{model_name=M}'."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def families(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def test_exposed_names_types_and_labels_are_vllms():
    m = ServerMetrics(
        "M",
        lambda: EngineStats(
            num_running=3,
            num_waiting=2,
            kv_cache_usage=0.25,
            prompt_tokens_total=70,
            prefix_cache_hits_total=16,
        ),
        lambda: SampleCounters(logged=5, journaled=2, dropped=1),
    )
    text = m.render().decode()
    fams = families(text)
    for name in VLLM_COUNTERS + VIGIL_COUNTERS:
        assert fams[name] == "counter", name
        assert f"\n{name}_total{{" in text  # exactly vLLM's exposed sample name, no double suffix
    for name in VLLM_GAUGES:
        assert fams[name] == "gauge"
    for name in VLLM_HISTOGRAMS:
        assert fams[name] == "histogram"
    values = scrape(text)
    assert values["vllm:num_requests_running{model_name=M}"] == 3
    assert values["vllm:num_requests_waiting{model_name=M}"] == 2
    assert values["vllm:kv_cache_usage_perc{model_name=M}"] == 0.25
    assert values["vllm:prompt_tokens_total{model_name=M}"] == 70
    assert values["vllm:prefix_cache_hits_total{model_name=M}"] == 16
    assert values["vigil:samples_logged_total{model_name=M}"] == 5
    assert values["vigil:samples_journaled_total{model_name=M}"] == 2
    assert values["vigil:samples_dropped_total{model_name=M}"] == 1
    assert values["vllm:request_success_total{finished_reason=stop,model_name=M}"] == 0
    assert "_total_total" not in text


def test_finished_request_feeds_the_histograms():
    m = ServerMetrics("M")
    metrics = RequestMetrics(
        arrival_time=10.0,
        first_scheduled_time=10.5,
        first_token_time=11.0,
        last_token_time=13.0,
        finished_time=13.0,
    )
    outs = [
        CompletionOutput(0, "a", "", [1, 2, 3, 4, 5], finish_reason="length"),
        CompletionOutput(1, "b", "", [1, 2], finish_reason="stop"),
    ]
    m.observe_finished(RequestOutput("r", "p", [1], outs, True, metrics))
    v = scrape(m.render().decode())
    assert v["vllm:time_to_first_token_seconds_sum{model_name=M}"] == pytest.approx(1.0)
    assert v["vllm:request_queue_time_seconds_sum{model_name=M}"] == pytest.approx(0.5)
    assert v["vllm:e2e_request_latency_seconds_sum{model_name=M}"] == pytest.approx(3.0)
    assert v["vllm:e2e_request_latency_seconds_bucket{le=2.5,model_name=M}"] == 0
    assert v["vllm:e2e_request_latency_seconds_bucket{le=5.0,model_name=M}"] == 1
    assert v["vllm:request_success_total{finished_reason=length,model_name=M}"] == 1
    assert v["vllm:request_success_total{finished_reason=stop,model_name=M}"] == 1


@pytest.fixture(scope="module")
def server():
    settings = make_settings()
    with ServerThread(create_app(settings, engine=shared_engine(), log_traffic=False)) as srv:
        srv.model = settings.model_name
        yield srv


def test_counters_move_as_requests_run(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    label = f"model_name={server.model}"
    before = scrape(httpx.get(server.url + "/metrics").text)
    chat = client.chat.completions.create(
        model=server.model,
        max_tokens=5,
        temperature=0,
        messages=[{"role": "user", "content": "Say hello."}],
        stream=False,
    )
    done = client.completions.create(
        model=server.model, prompt="One, two,", max_tokens=3, temperature=0
    )
    response = httpx.get(server.url + "/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    after = scrape(response.text)

    def delta(name: str, extra: str = "") -> float:
        key = f"{name}{{{extra}{label}}}"
        return after[key] - before.get(key, 0.0)

    assert delta("vllm:prompt_tokens_total") == chat.usage.prompt_tokens + done.usage.prompt_tokens
    assert (
        delta("vllm:generation_tokens_total")
        == chat.usage.completion_tokens + done.usage.completion_tokens
    )
    reasons = [chat.choices[0].finish_reason, done.choices[0].finish_reason]
    for reason in ("stop", "length"):
        assert delta("vllm:request_success_total", f"finished_reason={reason},") == reasons.count(
            reason
        )
    for name in VLLM_HISTOGRAMS[0::2] + VLLM_HISTOGRAMS[3:]:
        assert delta(f"{name}_count") == 2, name
    # one inter-token interval per token after each request's first
    expected_itl = chat.usage.completion_tokens - 1 + done.usage.completion_tokens - 1
    assert delta("vllm:inter_token_latency_seconds_count") == expected_itl
    assert delta("vllm:prefix_cache_queries_total") >= 1
    assert after[f"vllm:num_requests_running{{{label}}}"] == 0


class CoalescedEngine(EngineClientDouble):
    """Outputs as a lagging stream receives them: several tokens at once (2, then 3, then 1)."""

    coalesces_outputs = True
    max_model_len = 512

    class tokenizer:  # noqa: N801
        @staticmethod
        def decode(ids, skip_special_tokens=False):
            return "t" * len(ids)

    def num_waiting(self):
        return 0

    def abort(self, request_id):
        pass

    def stats(self):
        return None

    async def generate(self, request_id, ids, params, prompt=None):
        import asyncio
        import time

        start = time.monotonic()
        metrics = RequestMetrics(
            arrival_time=start, first_token_time=start + 0.01, last_token_time=start + 0.02
        )
        for count in (2, 5, 6):
            last = count == 6
            choice = CompletionOutput(
                0, "t" * count, "", list(range(count)), None, "length" if last else None
            )
            yield RequestOutput(request_id, prompt, ids, [choice], last, metrics)
            await asyncio.sleep(0.01)


def test_coalesced_tokens_each_count_one_inter_token_interval():
    """Was: one interval per output, so a stream that fell behind (several tokens per output)
    undercounted vllm:inter_token_latency_seconds (5 tokens after the first gave 2)."""
    import asyncio

    settings = make_settings()
    app = create_app(settings, engine=CoalescedEngine(), log_traffic=False)

    async def run() -> str:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://engine"
        ) as client:
            r = await client.post(
                "/v1/completions",
                headers={"Authorization": f"Bearer {API_KEY}"},
                json={"model": settings.model_name, "prompt": [1, 2], "max_tokens": 6},
            )
            assert r.status_code == 200
            return (await client.get("/metrics")).text

    app.state.vigil.phase = Phase.READY  # the lifespan would do this; ASGITransport skips it
    v = scrape(asyncio.run(run()))
    label = f"model_name={settings.model_name}"
    assert v[f"vllm:inter_token_latency_seconds_count{{{label}}}"] == 5
    # the first output's second token: the engine's 10 ms first-to-last span; then the gaps
    assert v[f"vllm:inter_token_latency_seconds_sum{{{label}}}"] >= 0.01 + 0.015
