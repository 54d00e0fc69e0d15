"""What /metrics exposes: vLLM's histogram names, help texts and bucket boundaries (so vLLM
dashboards and autoscaling rules work unchanged), and Vigil's own logging counters."""

from __future__ import annotations

from dataclasses import dataclass

# vLLM's bucket boundaries (vllm/v1/metrics/loggers.py)
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip
LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
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
    ("ttft", "vllm:time_to_first_token_seconds",
     "Histogram of time to first token in seconds.", TTFT_BUCKETS),
    ("itl", "vllm:inter_token_latency_seconds",
     "Histogram of inter-token latency in seconds.", ITL_BUCKETS),
    ("e2e", "vllm:e2e_request_latency_seconds",
     "Histogram of e2e request latency in seconds.", LATENCY_BUCKETS),
    ("queue_time", "vllm:request_queue_time_seconds",
     "Histogram of time spent in WAITING phase for request.", LATENCY_BUCKETS),
    ("tpot", "vllm:request_time_per_output_token_seconds",
     "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS),
    # the pre-v1 per-token name (same observations as the inter-token latency)
    ("tpot_per_token", "vllm:time_per_output_token_seconds",
     "Histogram of time per output token in seconds.", ITL_BUCKETS),
    ("prefill_time", "vllm:request_prefill_time_seconds",
     "Histogram of time spent in PREFILL phase for request.", LATENCY_BUCKETS),
    ("decode_time", "vllm:request_decode_time_seconds",
     "Histogram of time spent in DECODE phase for request.", LATENCY_BUCKETS),
    ("inference_time", "vllm:request_inference_time_seconds",
     "Histogram of time spent in RUNNING phase for request.", LATENCY_BUCKETS),
    ("prompt_tokens", "vllm:request_prompt_tokens", "Number of prefill tokens processed.", None),
    ("generation_tokens", "vllm:request_generation_tokens",
     "Number of generation tokens processed.", None),
    ("max_generation_tokens", "vllm:request_max_num_generation_tokens",
     "Histogram of maximum number of requested generation tokens.", None),
]  # fmt: skip


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
