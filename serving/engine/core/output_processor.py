"""Turns sampled tokens into sequence state: finish conditions (EOS, stop token ids, max_tokens,
context length, stop strings), incremental UTF-8-safe text, logprobs, and per-request outputs.

`LLMEngine` hands every sampled token to its output sink (`OutputSink`), chosen when the engine
is built: `OutputProcessor` (text, `RequestOutput`) in the API process or in-process engine,
`TokenDeltaProcessor` (token ids only, `RequestDelta`) in the engine-core process. Both record
tokens and decide finishes through `TokenRecorder`; they differ in what a step hands out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from serving.detokenizer import IncrementalDetokenizer
from serving.engine.core.request import Request, Sequence
from serving.engine.core.request_output import (
    prompt_logprob_entries,
    request_output,
    token_text,
)
from serving.engine.core.sample_result import SampleResult
from serving.outputs import RequestOutput, TokenLogprob
from serving.sampling_params import RequestOutputKind
from serving.stop import StopStringMatcher


class SeqTextState:
    """A sequence's incremental detokenizer feeding its stop-string matcher (which holds back
    text that could still become a stop string)."""

    def __init__(self, tokenizer, stop: list[str], include_stop: bool):
        self.detok = IncrementalDetokenizer(tokenizer)
        self.matcher = StopStringMatcher(stop, include_stop)
        # a model's embedding table may be padded past the tokenizer's vocabulary (Qwen): such
        # ids have no text
        self.vocab_size = tokenizer.vocab_size

    def add(self, token_id: int) -> tuple[str, str | None]:
        """Returns (text safe to emit now, the stop string hit or None)."""
        if token_id >= self.vocab_size:
            return self.matcher.feed("")
        return self.matcher.feed(self.detok.add(token_id))

    def flush(self) -> str:
        """The sequence ended for another reason: release held-back bytes and text."""
        text, _ = self.matcher.feed(self.detok.flush())
        return text + self.matcher.flush()


Out = TypeVar("Out", covariant=True)


class OutputSink(Protocol[Out]):
    """Where `LLMEngine` records sampled tokens and gets each advanced request's output."""

    def init_seq(self, seq: Sequence) -> None: ...

    def append(self, r: SampleResult) -> bool: ...

    def request_output(self, req: Request) -> Out | None: ...


# (tokenizer, eos token ids, max_model_len) -> the sink: the engine knows these only once loaded
OutputFactory = Callable[[Any, list[int], int], OutputSink[Out]]


class TokenRecorder:
    """Records sampled tokens on their sequences and decides finishes; with a tokenizer, also
    the text and stop strings."""

    def __init__(self, tokenizer: Any, eos_token_ids: list[int], max_model_len: int):
        self.tokenizer = tokenizer
        self.eos = set(eos_token_ids)
        self.max_model_len = max_model_len

    def init_seq(self, seq: Sequence) -> None:
        p = seq.request.params
        if self.tokenizer is not None:
            seq.output_state = SeqTextState(
                self.tokenizer, list(p.stop), p.include_stop_str_in_output
            )

    def append(self, r: SampleResult) -> bool:
        """Record a sampled token; returns True when it finished the sequence."""
        seq, p, tok = r.seq, r.seq.request.params, r.token_id
        seq.append_token(tok)
        seq.logprobs.append(r.logprob)
        seq.entropies.append(r.entropy)
        seq.logprob_sum += r.logprob
        seq.entropy_sum += r.entropy
        if p.logprobs is not None:
            alts = [(int(t), self._token_text(int(t)), float(v)) for t, v in (r.top_logprobs or [])]
            seq.token_logprobs.append(
                TokenLogprob(tok, self._token_text(tok), r.logprob, alts[: p.logprobs])
            )
        if p.stop_token_ids and tok in p.stop_token_ids:
            return self._finish(seq, "stop", tok)
        if tok in self.eos and not p.ignore_eos:
            return self._finish(seq, "stop", None)
        state = seq.output_state
        if isinstance(state, SeqTextState):
            text, hit = state.add(tok)
            seq.text += text
            if hit is not None:
                return self._finish(seq, "stop", hit)
        n = len(seq.token_ids)
        if n - seq.num_prompt_tokens >= p.max_tokens or n >= self.max_model_len:
            return self._finish(seq, "length", None)
        return False

    def _finish(self, seq: Sequence, reason: str, stop_reason: str | int | None) -> bool:
        if isinstance(seq.output_state, SeqTextState) and not isinstance(stop_reason, str):
            seq.text += seq.output_state.flush()  # a stop string's hold-back is dropped with it
        seq.finish_reason, seq.stop_reason = reason, stop_reason
        return True

    def _token_text(self, token_id: int) -> str:
        return token_text(self.tokenizer, token_id)


class OutputProcessor(TokenRecorder):
    """The text sink: cumulative `RequestOutput`s (request_output.py builds them), or only the
    final one for a request that asks for that (`RequestOutputKind.FINAL_ONLY`, as an offline
    caller does)."""

    def request_output(self, req: Request) -> RequestOutput | None:
        """The request's cumulative output; None while a FINAL_ONLY request runs."""
        finished = req.is_finished
        if not finished and req.params.output_kind is RequestOutputKind.FINAL_ONLY:
            return None
        seqs = req.seqs if len(req.seqs) == 1 else sorted(req.seqs, key=lambda s: s.index)
        return request_output(
            req.request_id,
            req.prompt,
            req.prompt_token_ids,
            seqs,
            with_logprobs=req.params.logprobs is not None,
            finished=finished,
            metrics=req.metrics,
            prompt_logprobs=self._prompt_logprobs(req) if finished else None,
        )

    def _prompt_logprobs(self, req: Request) -> list[TokenLogprob | None] | None:
        k = req.params.prompt_logprobs
        # built once, on the final output; None when not asked or the prompt never finished
        if k is None or len(req.prompt_logprob_rows) < len(req.prompt_token_ids) - 1:
            return None
        return prompt_logprob_entries(self.tokenizer, req.prompt_logprob_rows, k)
