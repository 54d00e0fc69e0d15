"""Prometheus metrics under vLLM's names and meanings, so vLLM dashboards and autoscaling
rules work unchanged. One `CollectorRegistry` per app (tests build several apps per process).

Gauges and engine-wide counters are read from the engine's `EngineStats` snapshot at scrape
time; per-request histograms and finish reasons are observed by the API layer; the `vigil:`
counters come from the traffic logger and the sample writer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from serving.outputs import EngineStats, RequestOutput

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# vLLM's bucket boundaries (vllm/v1/metrics/loggers.py)
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
DEFAULT_MAX_MODEL_LEN = 32768


def token_buckets(max_value: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to max_value: vLLM's build_1_2_5_buckets for token counts."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(float(value))
        exponent += 1


# (key in ServerMetrics.child, vLLM's name, vLLM's help, buckets; None: token counts up to the
# context length)
HISTOGRAMS: list[tuple[str, str, str, tuple[float, ...] | None]] = [
    (
        "ttft",
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        TTFT_BUCKETS,
    ),
    (
        "itl",
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        ITL_BUCKETS,
    ),
    (
        "e2e",
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        LATENCY_BUCKETS,
    ),
    (
        "queue_time",
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        LATENCY_BUCKETS,
    ),
    (
        "tpot",
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        ITL_BUCKETS,
    ),
    # the pre-v1 per-token name (same observations as the inter-token latency)
    (
        "tpot_per_token",
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        ITL_BUCKETS,
    ),
    (
        "prefill_time",
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        LATENCY_BUCKETS,
    ),
    (
        "decode_time",
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        LATENCY_BUCKETS,
    ),
    (
        "inference_time",
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        LATENCY_BUCKETS,
    ),
    ("prompt_tokens", "vllm:request_prompt_tokens", "Number of prefill tokens processed.", None),
    (
        "generation_tokens",
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        None,
    ),
    (
        "max_generation_tokens",
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        None,
    ),
]


@dataclass
class SampleCounters:
    """Vigil's own logging counters at scrape time."""

    logged: int = 0  # rows the writer committed to the database
    journaled: int = 0  # records the writer spilled to its journal (database unreachable)
    dropped: int = 0  # records lost before storage (hand-off queue full, writer refused)
    sampled: int = 0  # finished requests the sampler kept


SAMPLE_COUNTERS = [  # (name, help, SampleCounters field)
    ("vigil:samples_logged", "Sampled requests written to the database.", "logged"),
    ("vigil:samples_journaled", "Sampled requests spilled to the local journal.", "journaled"),
    ("vigil:samples_dropped", "Sampled requests lost before reaching storage.", "dropped"),
    ("vigil:requests_sampled", "Finished requests the traffic sampler kept.", "sampled"),
]


class _SnapshotCollector(Collector):
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


class ServerMetrics:
    def __init__(
        self,
        model_name: str,
        engine_stats: Callable[[], EngineStats | None] = lambda: None,
        sample_counters: Callable[[], SampleCounters] = SampleCounters,
        max_model_len: int | None = None,
        multiprocess_dir: str | None = None,
    ):
        """`multiprocess_dir`: prometheus_client's multiprocess directory (several API processes;
        PROMETHEUS_MULTIPROC_DIR must have been set before prometheus_client was imported)."""
        self.model_name = model_name
        self.registry = CollectorRegistry(auto_describe=True)
        self.snapshot = _SnapshotCollector(
            model_name,
            engine_stats,
            sample_counters,
            include_sample_counters=multiprocess_dir is None,
        )
        self.registry.register(self.snapshot)
        self.shared = None
        if multiprocess_dir is not None:
            from serving.server.multiprocess_metrics import SharedMetrics

            self.shared = SharedMetrics(
                multiprocess_dir, model_name, sample_counters, self.snapshot
            )
        labels = ["model_name"]
        r = self.registry
        self.request_success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels + ["finished_reason"],
            registry=r,
        )
        # children exist from the start, as in vLLM, so dashboards see zeros rather than gaps
        # (kept: `labels()` looks a child up under a lock, and the token path observes per token)
        tokens = token_buckets(max_model_len or DEFAULT_MAX_MODEL_LEN)
        self.child = {
            key: Histogram(name, doc, labels, buckets=buckets or tokens, registry=r).labels(
                model_name
            )
            for key, name, doc, buckets in HISTOGRAMS
        }
        self.success = {
            reason: self.request_success.labels(model_name, reason)
            for reason in ("stop", "length", "abort")
        }

    def observe_token_intervals(self, seconds: float, count: int) -> None:
        """`count` tokens arrived over `seconds` (several at once when a stream's outputs were
        coalesced): one interval each, of an equal share."""
        share = max(0.0, seconds) / count
        for _ in range(count):
            self.child["itl"].observe(share)
            self.child["tpot_per_token"].observe(share)

    def observe_finished(self, output: RequestOutput) -> None:
        """Record a finished request's latencies and each choice's finish reason."""
        child = self.child
        m = output.metrics
        if m.first_token_time is not None:
            child["ttft"].observe(max(0.0, m.first_token_time - m.arrival_time))
        if m.first_scheduled_time is not None:
            child["queue_time"].observe(max(0.0, m.first_scheduled_time - m.arrival_time))
        end = m.finished_time if m.finished_time is not None else m.last_token_time
        if end is not None:
            child["e2e"].observe(max(0.0, end - m.arrival_time))
        if m.first_scheduled_time is not None and m.first_token_time is not None:
            child["prefill_time"].observe(max(0.0, m.first_token_time - m.first_scheduled_time))
        if m.first_token_time is not None and m.last_token_time is not None:
            child["decode_time"].observe(max(0.0, m.last_token_time - m.first_token_time))
        if m.first_scheduled_time is not None and m.last_token_time is not None:
            child["inference_time"].observe(max(0.0, m.last_token_time - m.first_scheduled_time))
        n_out = max((len(c.token_ids) for c in output.outputs), default=0)
        child["prompt_tokens"].observe(len(output.prompt_token_ids))
        child["generation_tokens"].observe(sum(len(c.token_ids) for c in output.outputs))
        child["max_generation_tokens"].observe(n_out)
        if n_out > 1 and m.first_token_time is not None and m.last_token_time is not None:
            child["tpot"].observe(max(0.0, m.last_token_time - m.first_token_time) / (n_out - 1))
        for choice in output.outputs:
            reason = choice.finish_reason or "abort"
            counter = self.success.get(reason)
            if counter is None:
                counter = self.request_success.labels(self.model_name, reason)
            counter.inc()

    def render(self) -> bytes:
        if self.shared is not None:
            return self.shared.render()
        return generate_latest(self.registry)

    def publish(self) -> None:
        """Several API processes: write this process's sample counters to the shared files."""
        if self.shared is not None:
            self.shared.publish()
