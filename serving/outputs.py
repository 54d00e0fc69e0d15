"""What the engine hands back per step: typed outputs the API layer turns into OpenAI payloads."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from typing import Any, overload


class ListPrefix(SequenceABC[Any]):
    """A read-only snapshot of the first `stop` items from `start` of an APPEND-ONLY list, made
    in O(1). Running outputs carry these instead of copies: a step would otherwise copy every
    sequence's whole token list (O(batch x length) per step). Later appends stay invisible, so
    an output read on another thread after more steps still shows what it had. Compares equal
    to a list with the same items; slicing returns a list."""

    __slots__ = ("_items", "_start", "_stop")

    def __init__(self, items: list[Any], start: int = 0, stop: int | None = None):
        self._items, self._start = items, start
        self._stop = len(items) if stop is None else stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return self._items[self._start : self._stop][i]
        n = self._stop - self._start
        if not -n <= i < n:
            raise IndexError("ListPrefix index out of range")
        return self._items[self._start + (i % n)]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items[self._start : self._stop])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ListPrefix)):
            return len(other) == len(self) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a list

    def __repr__(self) -> str:
        return repr(list(self))


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
    # while running: a ListPrefix snapshot (len/index/slice/iterate/== like a list); a real list
    # once finished
    token_ids: list[int] | ListPrefix
    logprobs: list[TokenLogprob] | ListPrefix | None = None  # all so far, when requested
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
    # when asked (SamplingParams.prompt_logprobs): one entry per prompt token, the first None
    # (nothing precedes it); filled once the prompt has been computed
    prompt_logprobs: list[TokenLogprob | None] | None = None


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
