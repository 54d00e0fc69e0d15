"""What the engine hands back per step: typed outputs the API layer turns into OpenAI payloads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TokenLogprob:
    token_id: int
    token: str  # decoded text of this token alone (may be a partial UTF-8 char: then bytes escaped)
    logprob: float
    top: list[tuple[int, str, float]] = field(default_factory=list)  # (token_id, token, logprob)


@dataclass
class CompletionOutput:
    index: int  # which of the request's n samples
    text: str  # all text so far (stop strings removed)
    delta: str  # text new since the previous RequestOutput for this request
    token_ids: list[int]
    logprobs: list[TokenLogprob] | None = None  # all so far, when requested
    finish_reason: str | None = None  # None while running; "stop" | "length" | "abort"
    stop_reason: str | int | None = None  # the stop string or token id that ended it
    # statistics of the sampled distribution over the generated tokens (kept for monitoring)
    mean_logprob: float | None = None
    mean_entropy: float | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Monotonic timestamps (time.monotonic seconds) of a request's life."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None
    num_preemptions: int = 0
    num_cached_prompt_tokens: int = 0  # prompt tokens served from the prefix cache


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics


@dataclass
class EngineStats:
    """A snapshot for /metrics, read without blocking the engine loop."""

    num_running: int = 0
    num_waiting: int = 0
    kv_cache_usage: float = 0.0  # fraction of KV blocks in use, 0..1
    num_preemptions_total: int = 0
    prefix_cache_queries_total: int = 0  # prompt tokens looked up
    prefix_cache_hits_total: int = 0  # prompt tokens found
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
