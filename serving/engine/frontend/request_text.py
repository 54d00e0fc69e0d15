"""The API process's side of engine outputs: token deltas from the engine core become the same
`RequestOutput`s the in-process engine produces (cumulative text with stop strings applied,
token ids, logprobs, means, metrics).

Per sequence an incremental detokenizer feeds a stop-string matcher (the engine's own
`SeqTextState`). A stop string ends the sequence here; the core learns of it from an abort, so
tokens it sampled past the stop in the meantime are dropped. The outputs come from the engine's
one builder (core/request_output.py), which reads a `FrontSeq` as it reads a `Sequence`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from serving.engine.core.output_processor import SeqTextState
from serving.engine.core.request_output import (
    PromptRow,
    prompt_logprob_entries,
    request_output,
    token_text,
)
from serving.engine.frontend.messages import RequestDelta, SeqDelta
from serving.engine.frontend.output_slot import OutputSlot
from serving.outputs import RequestMetrics, RequestOutput, TokenLogprob
from serving.sampling_params import SamplingParams


@dataclass(eq=False)
class FrontSeq:
    index: int
    text_state: SeqTextState | None
    token_ids: list[int] = field(default_factory=list)  # generated tokens only
    token_logprobs: list[TokenLogprob] = field(default_factory=list)
    num_prompt_tokens: int = 0  # `token_ids` holds no prompt (the builder's offset)
    text: str = ""
    sent_text_len: int = 0
    logprob_sum: float = 0.0
    entropy_sum: float = 0.0
    num_scored: int = 0
    finish_reason: str | None = None
    stop_reason: str | int | None = None


class FrontRequest:
    """One request's output state in the API process."""

    def __init__(
        self,
        request_id: str,
        prompt: str | None,
        prompt_token_ids: list[int],
        params: SamplingParams,
        tokenizer,
        arrival_time: float,
    ):
        self.request_id, self.prompt, self.params = request_id, prompt, params
        self.prompt_token_ids = prompt_token_ids
        self.tokenizer = tokenizer
        self.metrics = RequestMetrics(arrival_time=arrival_time)
        self.seqs: dict[int, FrontSeq] = {}
        self.finished = False
        self.prompt_logprobs: list[TokenLogprob | None] | None = None

    def _seq(self, index: int) -> FrontSeq:
        seq = self.seqs.get(index)
        if seq is None:
            p = self.params
            state = (
                SeqTextState(self.tokenizer, list(p.stop), p.include_stop_str_in_output)
                if self.tokenizer is not None
                else None
            )
            seq = self.seqs[index] = FrontSeq(index, state)
        return seq

    def apply(self, delta: RequestDelta) -> RequestOutput:
        """Fold in one delta from the core; returns the request's output after it. When a stop
        string finishes the last running sequence the output is final (`finished`) even though
        the core is still running it: the caller aborts it there."""
        self.fold(delta)
        return self.output()

    def fold(self, delta: RequestDelta) -> bool:
        """`apply` without building the output (`output()` builds it, with every delta's text
        since the last one built); returns whether the request is finished."""
        for sd in delta.seqs:
            seq = self._seq(sd.index)
            if seq.finish_reason is None:
                self._apply_seq(seq, sd)
        m = self.metrics
        m.first_scheduled_time = delta.first_scheduled_time
        m.first_token_time = delta.first_token_time
        m.last_token_time = delta.last_token_time
        m.num_preemptions, m.num_cached_prompt_tokens = (
            delta.num_preemptions,
            delta.num_cached_prompt_tokens,
        )
        # before an n > 1 request forks, the core reports its one prompt sequence
        forked = delta.finished or len(self.seqs) >= self.params.n
        done = forked and all(s.finish_reason is not None for s in self.seqs.values())
        if done and not self.finished:
            self.finished = True
            m.finished_time = delta.finished_time or time.monotonic()
            if delta.prompt_logprobs is not None:
                self.prompt_logprobs = self._prompt_logprobs(delta.prompt_logprobs)
        return self.finished

    def fold_token(self, token_id: int, logprob: float, entropy: float, token_time: float) -> bool:
        """`fold` of one `TokenRows` row: one plain token of this one-sequence request."""
        seq = self._seq(0)
        if seq.finish_reason is None:
            seq.token_ids.append(token_id)
            seq.logprob_sum += logprob
            seq.entropy_sum += entropy
            seq.num_scored += 1
            if seq.text_state is not None:
                self._add_text(seq, token_id)
        self.metrics.last_token_time = token_time
        if seq.finish_reason is not None and not self.finished:  # a stop string ended it here
            self.finished = True
            self.metrics.finished_time = time.monotonic()
        return self.finished

    def _add_text(self, seq: FrontSeq, token_id: int) -> bool:
        """Detokenize one token into the text; True when a stop string ended the sequence."""
        assert seq.text_state is not None  # called only with a tokenizer
        text, hit = seq.text_state.add(token_id)
        seq.text += text
        if hit is None:
            return False
        seq.finish_reason, seq.stop_reason = "stop", hit
        return True

    def _apply_seq(self, seq: FrontSeq, sd: SeqDelta) -> None:
        tokenizer, state = self.tokenizer, seq.text_state
        last = len(sd.token_ids) - 1
        for i, tok in enumerate(sd.token_ids):
            seq.token_ids.append(tok)
            seq.logprob_sum += sd.logprobs[i]
            seq.entropy_sum += sd.entropies[i]
            seq.num_scored += 1
            if sd.top is not None and self.params.logprobs is not None:
                alts = [(t, token_text(tokenizer, t), lp) for t, lp in sd.top[i]]
                seq.token_logprobs.append(
                    TokenLogprob(
                        tok,
                        token_text(tokenizer, tok),
                        sd.logprobs[i],
                        alts[: self.params.logprobs],
                    )
                )
            # the core ended on an EOS or stop token: its text is never shown
            if i == last and sd.finish_reason == "stop":
                break
            if state is not None and self._add_text(seq, tok):
                return
        if sd.finish_reason is not None:
            if state is not None:
                seq.text += state.flush()
            seq.finish_reason, seq.stop_reason = sd.finish_reason, sd.stop_reason

    def abort(self) -> RequestOutput:
        """The request ends now (client gone, the core died): every running sequence 'abort'."""
        for seq in self.seqs.values():
            if seq.finish_reason is None:
                seq.finish_reason = "abort"
        if not self.seqs:
            self._seq(0).finish_reason = "abort"
        self.finished = True
        self.metrics.finished_time = self.metrics.finished_time or time.monotonic()
        return self.output()

    def output(self) -> RequestOutput:
        return request_output(
            self.request_id,
            self.prompt,
            self.prompt_token_ids,
            [self.seqs[i] for i in sorted(self.seqs)],
            with_logprobs=self.params.logprobs is not None,
            finished=self.finished,
            metrics=self.metrics,
            prompt_logprobs=self.prompt_logprobs,
        )

    def _prompt_logprobs(self, rows: list[PromptRow]) -> list[TokenLogprob | None]:
        return prompt_logprob_entries(self.tokenizer, rows, self.params.prompt_logprobs or 0)


def next_output(front: FrontRequest, slot: OutputSlot, delta: RequestDelta) -> RequestOutput | None:
    """Fold `delta` into `front`; the output to hand to `slot` now, or None while the slot's
    reader has not taken the last one (`slot.behind`): outputs are cumulative, so the next one
    built carries this step's text, and a stream that fell behind costs one output per read,
    not one per step. A finished request's output is always built."""
    return output_for(front, slot, front.fold(delta))


def output_for(front: FrontRequest, slot: OutputSlot, finished: bool) -> RequestOutput | None:
    """After a fold (`finished`: what it returned): `next_output`'s choice."""
    if not finished and slot.behind:
        return None
    slot.behind = True
    return front.output()
