"""The engine side of /metrics, read when Prometheus scrapes: vLLM's gauges and engine-wide
counters from the engine's `EngineStats` snapshot, and Vigil's logging counters."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from serving.outputs import EngineStats
from serving.server.metrics.metric_catalog import SAMPLE_COUNTERS, SampleCounters


class SnapshotCollector(Collector):
    """Reads engine stats and sample counters when Prometheus scrapes."""

    def __init__(
        self,
        model_name: str,
        engine_stats: Callable[[], EngineStats | None],
        sample_counters: Callable[[], SampleCounters],
        include_sample_counters: bool = True,
    ):
        self.model_name = model_name
        self.engine_stats = engine_stats
        self.sample_counters = sample_counters
        # off with several API processes: each process's counts go to the multiprocess files
        self.include_sample_counters = include_sample_counters

    def describe(self) -> Iterable[Metric]:
        return []  # dynamic: skip the registry's duplicate-name check at registration

    def collect(self) -> Iterable[Metric]:
        label = [self.model_name]
        stats = self.engine_stats() or EngineStats()
        gauges = [
            (
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                stats.num_running,
            ),
            (
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
                stats.num_waiting,
            ),
            (
                "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
                stats.kv_cache_usage,
            ),
            # the pre-v1 name, still queried by vLLM's published Grafana dashboard
            (
                "vllm:gpu_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
                stats.kv_cache_usage,
            ),
        ]
        for name, doc, value in gauges:
            g = GaugeMetricFamily(name, doc, labels=["model_name"])
            g.add_metric(label, float(value))
            yield g
        counters = [
            (
                "vllm:prompt_tokens",
                "Number of prefill tokens processed.",
                stats.prompt_tokens_total,
            ),
            (
                "vllm:generation_tokens",
                "Number of generation tokens processed.",
                stats.generation_tokens_total,
            ),
            (
                "vllm:num_preemptions",
                "Cumulative number of preemption from the engine.",
                stats.num_preemptions_total,
            ),
            (
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                stats.prefix_cache_queries_total,
            ),
            (
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.",
                stats.prefix_cache_hits_total,
            ),
        ]
        if self.include_sample_counters:
            samples = self.sample_counters()
            counters += [
                (name, doc, getattr(samples, field)) for name, doc, field in SAMPLE_COUNTERS
            ]
        for name, doc, value in counters:
            c = CounterMetricFamily(name, doc, labels=["model_name"])
            c.add_metric(label, float(value))
            yield c
