"""The canary gauges on the sidecar's `/metrics`, read from the latest compared canary run when
Prometheus scrapes (so every replica exports what the leader measured)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from storage.repositories.canaries import get_canary_results, latest_compared_run

log = logging.getLogger("vigil.sidecar.canary")


class CanaryCollector(Collector):
    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self.session_factory = session_factory

    def describe(self) -> Iterable[Metric]:
        return []  # label sets are dynamic

    def collect(self) -> Iterable[Metric]:
        match = GaugeMetricFamily(
            "vigil_canary_token_match_ratio",
            "Share of a canary probe's tokens equal to its baseline, latest run.",
            labels=["probe"],
        )
        delta = GaugeMetricFamily(
            "vigil_canary_logprob_delta_max",
            "Largest |logprob - baseline logprob| before the first diverging token, latest run.",
            labels=["probe"],
        )
        ppl = GaugeMetricFamily(
            "vigil_canary_perplexity",
            "Perplexity of a canary reference text, latest run.",
            labels=["probe"],
        )
        try:
            with self.session_factory() as session:
                run = latest_compared_run(session)
                results = get_canary_results(session, run.id) if run is not None else []
        except Exception as exc:  # a scrape must not fail; vigil_database_up reports outages
            log.warning("canary metrics: database read failed: %s: %s", exc.__class__.__name__, exc)
            results = []
        for r in results:
            comparison = r.comparison or {}
            if comparison.get("token_match_rate") is not None:
                match.add_metric([r.probe], float(comparison["token_match_rate"]))
            if comparison.get("logprob_delta_max") is not None:
                delta.add_metric([r.probe], float(comparison["logprob_delta_max"]))
            if r.perplexity is not None:
                ppl.add_metric([r.probe], float(r.perplexity))
        return [match, delta, ppl]
