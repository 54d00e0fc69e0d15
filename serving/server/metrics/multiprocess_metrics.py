"""/metrics when several API processes share one port (`VIGIL_API_SERVER_COUNT` > 1).

A scrape reaches one process at random, so request counters and histograms live in
prometheus_client's multiprocess files (the parent sets PROMETHEUS_MULTIPROC_DIR to a fresh
directory before any child imports prometheus_client) and every scrape adds up all processes,
including those that already exited. The engine gauges and engine-wide counters come from the
core's stats, the same in every process, so the scraped process reports them alone. Each
process's traffic-logging counters (`vigil:*`) are copied into the files as they grow: every
second, before each scrape it answers, and once more when it drains.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from serving.server.metrics.metric_catalog import SAMPLE_COUNTERS, SampleCounters

PUBLISH_INTERVAL_S = 1.0


class SharedMetrics:
    def __init__(
        self,
        directory: str,
        model_name: str,
        sample_counters: Callable[[], SampleCounters],
        snapshot: Collector,
    ):
        self.directory, self.model_name = directory, model_name
        self.sample_counters, self.snapshot = sample_counters, snapshot
        self._counters = {
            field: Counter(name, doc, ["model_name"], registry=None)
            for name, doc, field in SAMPLE_COUNTERS
        }
        for counter in self._counters.values():
            counter.labels(model_name)  # zeros from the start, as the other counters
        self._published = SampleCounters()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._publish_forever, name="vigil-metrics-publish", daemon=True
        )
        self._thread.start()

    def publish(self) -> None:
        """Add what this process counted since the last call to the shared counters."""
        with self._lock:
            now = self.sample_counters()
            for f in fields(SampleCounters):
                delta = getattr(now, f.name) - getattr(self._published, f.name)
                if delta > 0:
                    self._counters[f.name].labels(self.model_name).inc(delta)
            self._published = now

    def _publish_forever(self) -> None:
        stop = threading.Event()
        while not stop.wait(PUBLISH_INTERVAL_S):
            self.publish()

    def render(self) -> bytes:
        self.publish()
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry, self.directory)
        registry.register(self.snapshot)
        return generate_latest(registry)
