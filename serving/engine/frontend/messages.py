"""What the API server and the engine-core process say to each other, as typed msgspec Structs
over ZeroMQ (msgpack on the wire).

API -> core: `AddRequest`, `AbortRequests`, `Shutdown` (with several API processes, only their
parent sends `Shutdown`, and publishes `CoreDown` to them when the core died). Core -> API:
`CoreReady` once the model
is loaded (or `CoreFailed`), then one `StepOutputs` per engine step (or per batch of handled
commands): the new token ids of every request that advanced (plain one-token advances as
`TokenRows` columns, the rest as `RequestDelta`s), with the step's engine stats. Text
is never built in the core: detokenization and stop strings run on the API side.
"""

from __future__ import annotations

import msgspec

from serving.outputs import EngineStats
from serving.sampling_params import SamplingParams


class AddRequest(msgspec.Struct, tag="add", array_like=True):
    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams
    arrival_time: float
    client_index: int = 0  # which API process sent it: its outputs go back to that one


class AbortRequests(msgspec.Struct, tag="abort", array_like=True):
    request_ids: list[str]


class Shutdown(msgspec.Struct, tag="shutdown", array_like=True):
    pass


ToCore = AddRequest | AbortRequests | Shutdown


class SeqDelta(msgspec.Struct, array_like=True, omit_defaults=True):
    """One sequence's tokens sampled since the previous message."""

    index: int
    token_ids: list[int]
    logprobs: list[float]  # the sampled tokens' logprobs (always: the traffic log keeps means)
    entropies: list[float]
    # only when the request asked for logprobs: per token, the top (token id, logprob) pairs
    top: list[list[tuple[int, float]]] | None = None
    finish_reason: str | None = None  # "stop" (EOS or a stop token id) | "length" | "abort"
    stop_reason: int | None = None  # the stop token id that ended it


class RequestDelta(msgspec.Struct, array_like=True, omit_defaults=True):
    request_id: str
    seqs: list[SeqDelta]
    finished: bool
    # RequestMetrics' timestamps (time.monotonic: one clock for every process on the host)
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None
    num_preemptions: int = 0
    num_cached_prompt_tokens: int = 0
    # on the final delta, when asked: per prompt token after the first, (id, logprob, top pairs)
    prompt_logprobs: list[tuple[int, float, list[tuple[int, float]]]] | None = None


class RequestFailed(msgspec.Struct, array_like=True):
    request_id: str
    message: str
    bad_request: bool  # True: the request itself was invalid (a 400), else the step failed


class TokenRows(msgspec.Struct, array_like=True):
    """A step's common case in columns: row i is one new token of request `request_ids[i]`, a
    running request of one sequence without top logprobs or preemptions, whose first token (and
    with it every metric but the token time) went in an earlier `RequestDelta`. Five list items
    per request instead of two Structs and three lists: ~10x less to build, encode and decode at
    256 streams."""

    request_ids: list[str] = []
    token_ids: list[int] = []
    logprobs: list[float] = []
    entropies: list[float] = []
    token_times: list[float] = []

    def add(
        self, request_id: str, token_id: int, logprob: float, entropy: float, token_time: float
    ) -> None:
        self.request_ids.append(request_id)
        self.token_ids.append(token_id)
        self.logprobs.append(logprob)
        self.entropies.append(entropy)
        self.token_times.append(token_time)

    def entries(self):
        """(request id, token id, logprob, entropy, token time) per row."""
        return zip(
            self.request_ids,
            self.token_ids,
            self.logprobs,
            self.entropies,
            self.token_times,
            strict=True,
        )


class StepOutputs(msgspec.Struct, tag="step", array_like=True):
    deltas: list[RequestDelta]
    stats: EngineStats
    adds_seen: int  # AddRequests handled so far by this core: the rest are still in flight
    failed: list[RequestFailed] = []
    rows: TokenRows | None = (
        None  # requests that advanced by one plain token (never in `deltas` too)
    )


class CoreReady(msgspec.Struct, tag="ready", array_like=True):
    """The model is loaded. The tokenizer travels pickled so the API process never loads the
    weights just to tokenize."""

    tokenizer_pickle: bytes
    vocab_size: int
    max_model_len: int
    device: str
    dtype: str
    attention: str
    generation: int = 0  # the parent's count of cores started (several API processes)
    pid: int = 0
    frozen_objects: int = 0  # start-up objects the core froze out of garbage collection


class CoreFailed(msgspec.Struct, tag="failed", array_like=True):
    message: str  # the load error: type and text


FromCore = StepOutputs | CoreReady | CoreFailed


class CoreDown(msgspec.Struct, tag="down", array_like=True):
    """Published by the multi-process parent to every API process when the core it supervises
    died: fail what is in flight, answer 503 until a `CoreReady` of a later generation."""

    generation: int
    exitcode: int | None


class Codec:
    """msgpack encoders/decoders for both directions (one per thread: not shared)."""

    def __init__(self) -> None:
        self.encoder = msgspec.msgpack.Encoder()
        self.to_core = msgspec.msgpack.Decoder(ToCore)
        self.from_core = msgspec.msgpack.Decoder(FromCore)
        self.from_parent = msgspec.msgpack.Decoder(CoreDown)
