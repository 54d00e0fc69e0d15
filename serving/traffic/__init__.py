"""Which finished requests get logged, and in what shape: the bridge from serving to storage.

`TrafficLogger` takes finished requests off the request path (an O(1) hand-off), decides with
`TrafficSampler` (base rate + per-segment hourly minimum, weight = 1/probability), builds the
sample record and submits it to storage's writer, which applies the one redaction step
(vigil.record_redaction).
"""

from serving.traffic.logger import FinishedRequest, TrafficLogger
from serving.traffic.record import RequestStats, build_record, stats_from_output
from serving.traffic.sampler import SampleDecision, TrafficSampler
from serving.traffic.segments import SegmentInfo, segment_from_request
from vigil.redact import redact_pii

__all__ = [
    "FinishedRequest",
    "RequestStats",
    "SampleDecision",
    "SegmentInfo",
    "TrafficLogger",
    "TrafficSampler",
    "build_record",
    "redact_pii",
    "segment_from_request",
    "stats_from_output",
]
