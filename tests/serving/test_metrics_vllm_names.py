"""Every metric vLLM's published Grafana dashboard (examples/online_serving/prometheus_grafana)
queries is on a live server's /metrics after one request, with the types its queries assume."""

from __future__ import annotations

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine

from serving.outputs import CompletionOutput, RequestMetrics, RequestOutput
from serving.server.metrics.metric_catalog import token_buckets
from serving.server.metrics.server_metrics import ServerMetrics
from serving.server.service.app import create_app

# sample names as they appear in the dashboard's PromQL expressions
DASHBOARD_QUERIES = [
    "vllm:e2e_request_latency_seconds_bucket",
    "vllm:e2e_request_latency_seconds_sum",
    "vllm:e2e_request_latency_seconds_count",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:time_per_output_token_seconds_bucket",
    "vllm:time_per_output_token_seconds_sum",
    "vllm:time_per_output_token_seconds_count",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:gpu_cache_usage_perc",
    "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_prompt_tokens_bucket",
    "vllm:request_generation_tokens_bucket",
    "vllm:request_success_total",
    "vllm:request_max_num_generation_tokens_bucket",
    "vllm:request_prefill_time_seconds_bucket",
    "vllm:request_prefill_time_seconds_sum",
    "vllm:request_prefill_time_seconds_count",
    "vllm:request_decode_time_seconds_bucket",
    "vllm:request_decode_time_seconds_sum",
    "vllm:request_decode_time_seconds_count",
    "vllm:request_queue_time_seconds_bucket",
    "vllm:request_queue_time_seconds_sum",
    "vllm:request_queue_time_seconds_count",
    "vllm:request_inference_time_seconds_bucket",
]


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_token_buckets_are_1_2_5_up_to_the_limit():
    assert token_buckets(512) == (1, 2, 5, 10, 20, 50, 100, 200, 500)
    assert token_buckets(1000)[-1] == 1000
    assert token_buckets(1) == (1,)


def test_phase_histograms_split_the_request_time():
    m = ServerMetrics("M", max_model_len=64)
    metrics = RequestMetrics(
        arrival_time=10.0,
        first_scheduled_time=10.5,
        first_token_time=11.25,
        last_token_time=13.0,
        finished_time=13.0,
    )
    outs = [
        CompletionOutput(0, "a", "", [1, 2, 3, 4, 5], finish_reason="length"),
        CompletionOutput(1, "b", "", [1, 2], finish_reason="stop"),
    ]
    m.observe_finished(RequestOutput("r", "p", [7, 8, 9], outs, True, metrics))
    got = {
        s.name + str(sorted(s.labels.items())): s.value
        for group in samples(m.render().decode()).values()
        for s in group
    }
    label = "[('model_name', 'M')]"
    assert got["vllm:request_prefill_time_seconds_sum" + label] == pytest.approx(0.75)
    assert got["vllm:request_decode_time_seconds_sum" + label] == pytest.approx(1.75)
    assert got["vllm:request_inference_time_seconds_sum" + label] == pytest.approx(2.5)
    assert got["vllm:request_prompt_tokens_sum" + label] == 3
    assert got["vllm:request_generation_tokens_sum" + label] == 7
    assert got["vllm:request_max_num_generation_tokens_sum" + label] == 5
    # 5 tokens fall in the le=5 bucket, not le=2
    assert (
        got["vllm:request_max_num_generation_tokens_bucket[('le', '2.0'), ('model_name', 'M')]"]
        == 0
    )
    assert (
        got["vllm:request_max_num_generation_tokens_bucket[('le', '5.0'), ('model_name', 'M')]"]
        == 1
    )


@pytest.fixture(scope="module")
def server():
    settings = make_settings()
    with ServerThread(create_app(settings, engine=shared_engine(), log_traffic=False)) as srv:
        srv.model = settings.model_name
        yield srv


def test_live_metrics_carry_every_name_the_vllm_dashboard_queries(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    done = client.completions.create(
        model=server.model, prompt="One, two,", max_tokens=4, temperature=0
    )
    exposed = samples(httpx.get(server.url + "/metrics").text)
    missing = [name for name in DASHBOARD_QUERIES if name not in exposed]
    assert not missing, missing
    for name in exposed:
        assert all(s.labels.get("model_name") == server.model for s in exposed[name]), name
    # the request landed in the new histograms
    label = {"model_name": server.model}
    counts = {n: s.value for n, group in exposed.items() for s in group if s.labels == label}
    assert counts["vllm:request_prompt_tokens_sum"] >= done.usage.prompt_tokens
    assert counts["vllm:request_generation_tokens_count"] >= 1
    assert counts["vllm:request_prefill_time_seconds_count"] >= 1
    assert counts["vllm:time_per_output_token_seconds_count"] >= done.usage.completion_tokens - 1
    assert counts["vllm:gpu_cache_usage_perc"] == counts["vllm:kv_cache_usage_perc"]
