"""The one builder of `RequestOutput`s, for every front-end: the engine's own sequences in the
in-process engine (output_processor.py) and the API process's `FrontSeq`s fed by the engine core
(frontend/request_text.py) read the same way, through `OutputSeq`.

Outputs are cumulative and O(1) per running sequence: token ids and logprob entries are
`ListPrefix` snapshots of append-only lists, copied once, when the sequence has finished; means
come from running sums.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Protocol

from serving.outputs import (
    CompletionOutput,
    ListPrefix,
    RequestMetrics,
    RequestOutput,
    TokenLogprob,
)

# a prompt-logprob row: (token id, its logprob, the top (id, logprob) alternatives)
PromptRow = tuple[int, float, list[tuple[int, float]]]


class OutputSeq(Protocol):
    """One sequence's output state, as the builder reads it."""

    index: int
    token_ids: list[int]  # from `num_prompt_tokens` on: the generated tokens
    num_prompt_tokens: int
    token_logprobs: list[TokenLogprob]  # the API's logprob entries, when asked
    text: str
    sent_text_len: int  # how much of `text` earlier outputs carried
    logprob_sum: float
    entropy_sum: float
    finish_reason: str | None
    stop_reason: str | int | None

    @property
    def num_scored(self) -> int:
        """Tokens whose logprob and entropy are in the sums."""
        ...


def token_text(tokenizer: Any, token_id: int) -> str:
    """One token's text alone (a partial UTF-8 character has its bytes escaped, not guessed)."""
    if tokenizer is None or token_id >= tokenizer.vocab_size:
        return ""
    return tokenizer.id_to_bytes(token_id).decode("utf-8", errors="backslashreplace")


def completion_output(seq: OutputSeq, with_logprobs: bool) -> CompletionOutput:
    """The sequence's cumulative output; its `delta` is the text since the last one built."""
    delta = seq.text[seq.sent_text_len :]
    seq.sent_text_len = len(seq.text)
    n = seq.num_scored
    done = seq.finish_reason is not None
    token_ids: list[int] | ListPrefix
    if done:
        token_ids = seq.token_ids[seq.num_prompt_tokens :]
    else:
        token_ids = ListPrefix(seq.token_ids, seq.num_prompt_tokens)
    logprobs = None
    if with_logprobs:
        logprobs = list(seq.token_logprobs) if done else ListPrefix(seq.token_logprobs)
    return CompletionOutput(
        index=seq.index,
        text=seq.text,
        delta=delta,
        token_ids=token_ids,
        logprobs=logprobs,
        finish_reason=seq.finish_reason,
        stop_reason=seq.stop_reason,
        mean_logprob=seq.logprob_sum / n if n else None,
        mean_entropy=seq.entropy_sum / n if n else None,
    )


def request_output(
    request_id: str,
    prompt: str | None,
    prompt_token_ids: list[int],
    seqs: Iterable[OutputSeq],
    *,
    with_logprobs: bool,
    finished: bool,
    metrics: RequestMetrics,
    prompt_logprobs: list[TokenLogprob | None] | None,
) -> RequestOutput:
    """`seqs` in index order; `prompt_logprobs` is reported on the finished output only."""
    if finished and metrics.finished_time is None:
        metrics.finished_time = time.monotonic()
    return RequestOutput(
        request_id=request_id,
        prompt=prompt,
        prompt_token_ids=prompt_token_ids,
        outputs=[completion_output(s, with_logprobs) for s in seqs],
        finished=finished,
        metrics=metrics,
        prompt_logprobs=prompt_logprobs if finished else None,
    )


def prompt_logprob_entries(
    tokenizer: Any, rows: Iterable[PromptRow], k: int
) -> list[TokenLogprob | None]:
    """The API's prompt logprobs: None for the first token (nothing predicts it), then one entry
    per scored prompt token with its top `k` alternatives."""
    first: list[TokenLogprob | None] = [None]
    return first + [
        TokenLogprob(
            int(t),
            token_text(tokenizer, int(t)),
            float(lp),
            [(int(a), token_text(tokenizer, int(a)), float(b)) for a, b in top[:k]],
        )
        for t, lp, top in rows
    ]
