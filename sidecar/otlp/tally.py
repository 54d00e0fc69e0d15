"""What the OTLP receivers did not store, and why: a process-wide tally by signal and reason
(exported as `vigil_otlp_rejected_total{signal, reason}`), and per sender whether everything it
sent lately mapped to nothing (shown under `otlp` on `/health`).

Reasons are a closed set of short labels (`REASONS`), never text from a request, so the
Prometheus label values stay few and safe. The sender table holds at most `MAX_SENDERS`
entries (the least recent goes first); a sender is named by its key id (a digest, safe to
show), never by its key or tenant label.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

REASONS = {
    "not_genai": "not a GenAI generation span (no gen_ai.* or OpenInference LLM attributes)",
    "other_operation": "a GenAI span of another operation than a generation",
    "invalid_record": "the span does not make a valid sample record",
    "refused_by_policy": "the caller's rules refuse the sample",
    "future_timestamp": "the span ends in the future",
    "too_many_attributes": "more attributes than VIGIL_OTLP_MAX_SPAN_ATTRIBUTES",
    "not_content_event": "not a GenAI content event",
    "no_span_context": "no trace and span id: cannot be joined to its span",
    "join_buffer_full": "the sender's join buffer is full (VIGIL_OTLP_JOIN_MAX_ROWS)",
    "expired_without_span": "its span did not come within VIGIL_OTLP_JOIN_WAIT_S",
}
MAX_SENDERS = 1000
RECENT_S = 3600.0  # a sender counts as sending only unmapped spans within this hour


class OtlpTally:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rejected: Counter[tuple[str, str]] = Counter()
        # sender -> [last seen (monotonic), spans stored, spans not stored, top reason]
        self._senders: OrderedDict[str, list[Any]] = OrderedDict()

    def count(self, signal: str, reasons: Mapping[str, int]) -> None:
        with self._lock:
            for reason, n in reasons.items():
                self._rejected[(signal, reason)] += n

    def sender(self, sender: str, stored: int, reasons: Mapping[str, int]) -> None:
        """Record one traces request of `sender`: how many spans mapped and why others did not."""
        missed = sum(reasons.values())
        if not stored and not missed:
            return
        now = time.monotonic()
        with self._lock:
            entry = self._senders.pop(sender, None)
            if entry is None or now - entry[0] > RECENT_S:
                entry = [now, 0, 0, None]
            entry[0] = now
            entry[1] += stored
            entry[2] += missed
            if reasons:
                entry[3] = max(reasons, key=lambda r: reasons[r])
            self._senders[sender] = entry
            while len(self._senders) > MAX_SENDERS:
                self._senders.popitem(last=False)

    def unmapped_only(self) -> list[dict[str, object]]:
        """Senders whose spans of the last hour all mapped to nothing, with the main reason."""
        now = time.monotonic()
        with self._lock:
            return [
                {"sender": sender, "spans": missed, "reason": REASONS.get(reason, reason)}
                for sender, (seen, stored, missed, reason) in self._senders.items()
                if now - seen <= RECENT_S and stored == 0 and missed > 0
            ][:20]

    def rejected(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._rejected)


JOB_TALLY = OtlpTally()  # what the otlp_join job of this process dropped


class OtlpCollector(Collector):
    def __init__(self, tally: OtlpTally) -> None:
        self.tally = tally

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "vigil_otlp_rejected",
            "OTLP spans and log records not stored, by signal and reason",
            labels=["signal", "reason"],
        )
        counts = Counter(self.tally.rejected())
        counts.update(JOB_TALLY.rejected())
        for (signal, reason), n in sorted(counts.items()):
            family.add_metric([signal, reason], n)
        yield family


def health_status(tally: OtlpTally) -> dict[str, object]:
    senders = tally.unmapped_only()
    if not senders:
        return {}
    return {
        "otlp": {
            "status": "spans map to nothing",
            "senders_with_only_unmapped_spans": senders,
            "what_to_check": "the instrumentation's conventions and content capture settings "
            "(README, Watch an existing stack)",
        }
    }
