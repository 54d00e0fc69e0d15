"""Prometheus metrics under vLLM's names and meanings, so vLLM dashboards and autoscaling
rules work unchanged. One `CollectorRegistry` per app (tests build several apps per process).

Gauges and engine-wide counters are read from the engine's `EngineStats` snapshot at scrape
time; per-request histograms and finish reasons are observed by the API layer; the `vigil:`
counters come from the traffic logger and the sample writer.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from serving.outputs import EngineStats, RequestOutput
from serving.server.metrics.metric_catalog import (
    DEFAULT_MAX_MODEL_LEN,
    HISTOGRAMS,
    SampleCounters,
    token_buckets,
)
from serving.server.metrics.snapshot_metrics import SnapshotCollector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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
        self.snapshot = SnapshotCollector(
            model_name,
            engine_stats,
            sample_counters,
            include_sample_counters=multiprocess_dir is None,
        )
        self.registry.register(self.snapshot)
        self.shared = None
        if multiprocess_dir is not None:
            from serving.server.metrics.multiprocess_metrics import SharedMetrics

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
