"""Hand finished requests from the request path to storage, without ever making it wait.

`TrafficLogger.log()` is an O(1) append; a daemon thread does the sampling decision and the
record building, then `writer.submit()` (itself non-blocking; the writer redacts). If the hand-off
queue is full, the caller builds and submits its own record (backpressure under overload, as the
writer spills to its journal when its own queue is full) rather than lose it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from serving.outputs import RequestOutput
from serving.traffic.record import RequestStats, build_record, stats_from_output
from serving.traffic.sampler import TrafficSampler
from serving.traffic.segments import SegmentInfo

log = logging.getLogger(__name__)


class RecordSink(Protocol):
    def submit(self, record: dict[str, Any]) -> bool: ...


class SpanSink(Protocol):
    """Engine spans out (serving.traffic.spans): every finished request, sampled or not."""

    def emit(self, item: FinishedRequest) -> None: ...

    def close(self, timeout: float = 10.0) -> None: ...


@dataclass
class FinishedRequest:
    output: RequestOutput  # the final output, every choice finished
    segment: SegmentInfo
    tools: list[str] = field(default_factory=list)
    end_time: float = field(default_factory=time.time)  # epoch seconds


@dataclass
class Observation:
    """What an `ObservedRequest` turned out to be: who sent it, and (read only when the sampler
    keeps it) per choice its statistics and the record's extra fields, and the model the answer
    names (else the logger's)."""

    segment: SegmentInfo
    read: Callable[[], tuple[list[tuple[RequestStats, dict[str, Any]]], str | None]]


@dataclass
class ObservedRequest:
    """A request served elsewhere (the proxy's upstream) whose statistics are worked out on
    the logging thread, off the request path: `observe()` returns them, or None to skip it."""

    observe: Callable[[], Observation | None]
    end_time: float = field(default_factory=time.time)  # epoch seconds


@dataclass
class LoggerCounters:
    seen: int = 0  # finished requests handed over
    sampled: int = 0  # requests the sampler kept
    submitted: int = 0  # records accepted by the writer
    dropped: int = 0  # records lost: record could not be built or the writer refused it
    internal: int = 0  # requests marked X-Vigil-Internal: not logged


_STOP = object()


class TrafficLogger:
    def __init__(
        self,
        sampler: TrafficSampler,
        sink: RecordSink | None,
        *,
        model_version: str | None,
        max_pending: int = 10_000,
        spans: SpanSink | None = None,
    ):
        self.sampler = sampler
        self.sink = sink
        self.spans = spans
        self.model_version = model_version
        self.counters = LoggerCounters()
        self._count_lock = threading.Lock()  # counters are bumped from two threads
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="vigil-traffic", daemon=True)
        self._thread.start()

    def log(self, item: FinishedRequest | ObservedRequest) -> None:
        """Called on the request path: an O(1) hand-off unless the logging thread is overloaded."""
        if (self.sink is None and self.spans is None) or self._closed:
            return
        if (
            isinstance(item, FinishedRequest) and item.segment.internal is not None
        ):  # Vigil's own traffic (judge, canaries): skipped
            self._count("internal")
            return
        self._count("seen")
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._process(item)

    def pending(self) -> int:
        return self._queue.qsize()

    def close(self, timeout: float = 10.0) -> bool:
        """Process everything handed over so far, then stop; True if it finished in time."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join(timeout)
        if self.spans is not None:
            self.spans.close(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            self._process(item)

    def _process(self, item: FinishedRequest | ObservedRequest) -> None:
        try:
            self._handle(item)
        except Exception:  # a bad record must not kill the logging thread
            log.exception("could not build a sample record")
            self._count("dropped")

    def _handle(self, item: FinishedRequest | ObservedRequest) -> None:
        if isinstance(item, ObservedRequest):
            self._handle_observed(item)
            return
        if self.spans is not None:
            try:
                self.spans.emit(item)
            except Exception:  # a span that cannot be built must not cost the sample
                log.exception("could not build the request's span")
        if self.sink is None:
            return
        decision = self.sampler.decide(item.segment.key(), item.end_time)
        if not decision.keep:
            return
        self._count("sampled")
        for choice in item.output.outputs:
            stats = stats_from_output(item.output, choice, end_time=item.end_time, tools=item.tools)
            record = build_record(
                stats,
                item.segment,
                decision,
                model_version=self.model_version,
                extra={"request_id": item.output.request_id, "choice_index": choice.index},
            )
            accepted = self.sink is not None and self.sink.submit(record)
            self._count("submitted" if accepted else "dropped")

    def _handle_observed(self, item: ObservedRequest) -> None:
        if self.sink is None:
            return
        seen = item.observe()
        if seen is None:
            return
        if seen.segment.internal is not None:  # judged once the request's headers were read
            self._count("internal")
            return
        decision = self.sampler.decide(seen.segment.key(), item.end_time)
        if not decision.keep:
            return
        self._count("sampled")
        choices, model_version = seen.read()
        for stats, extra in choices:
            record = build_record(
                stats,
                seen.segment,
                decision,
                extra=extra,
                model_version=model_version or self.model_version,
            )
            accepted = self.sink is not None and self.sink.submit(record)
            self._count("submitted" if accepted else "dropped")

    def _count(self, name: str, n: int = 1) -> None:
        with self._count_lock:
            setattr(self.counters, name, getattr(self.counters, name) + n)
