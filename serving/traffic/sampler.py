"""Stratified traffic sampling: a base rate plus a per-segment minimum per hour.

Within each clock hour and segment, the first `min_per_hour` requests are kept with probability
1; after that each is kept with probability `rate`. Every request's inclusion probability is
therefore known exactly, and `sample_weight = 1 / probability` makes weighted sums over the
kept rows unbiased (Horvitz-Thompson) estimates of the full traffic — while a segment that sends
fewer than `min_per_hour` requests an hour is kept whole (minorities over-sampled).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class SampleDecision:
    keep: bool
    probability: float  # the inclusion probability this request had

    @property
    def weight(self) -> float:
        return 1.0 / self.probability if self.probability > 0 else 0.0


class TrafficSampler:
    def __init__(
        self,
        rate: float,
        min_per_hour: int,
        *,
        seed: int | None = None,
        max_segments: int = 10_000,
    ):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"sample rate must be in [0, 1], got {rate}")
        if min_per_hour < 0:
            raise ValueError(f"segment minimum per hour must be >= 0, got {min_per_hour}")
        self.rate = rate
        self.min_per_hour = min_per_hour
        self.max_segments = max_segments  # bounds memory under high-cardinality segment keys
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._hour: int | None = None
        self._kept: dict[Hashable, int] = {}  # segment -> quota rows kept this hour

    def decide(self, segment: Hashable, timestamp: float) -> SampleDecision:
        """Decide for one finished request of `segment` that ended at epoch `timestamp`."""
        hour = int(timestamp // 3600)
        with self._lock:
            if hour != self._hour:
                self._hour, self._kept = hour, {}
            quota_used = self._kept.get(segment)
            if quota_used is None and len(self._kept) >= self.max_segments:
                quota_used = self.min_per_hour  # untracked overflow segments get the base rate
            elif quota_used is None:
                quota_used = 0
            if quota_used < self.min_per_hour:
                self._kept[segment] = quota_used + 1
                return SampleDecision(keep=True, probability=1.0)
            if self.rate >= 1.0:
                return SampleDecision(keep=True, probability=1.0)
            keep = self.rate > 0.0 and self._rng.random() < self.rate
            return SampleDecision(keep=keep, probability=self.rate)
