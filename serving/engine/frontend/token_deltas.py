"""The engine-core process's output side: token ids only, no text.

`TokenDeltaProcessor` is the engine's output sink there: a `TokenRecorder` with no tokenizer,
so finish conditions that need no text (EOS, stop token ids, max_tokens, context length) are
decided here, and per request it builds a `RequestDelta` of what was sampled since the last one,
or, when that is one plain token of a request already under way, a row of the step's
`TokenRows` (`take_rows`). Detokenization and stop strings happen in the API process
(`request_text.py`).
"""

from __future__ import annotations

import time
from typing import Any

from serving.engine.core.output_processor import OutputFactory, TokenRecorder
from serving.engine.core.request import Request, Sequence
from serving.engine.frontend.messages import RequestDelta, SeqDelta, TokenRows


class TokenDeltaProcessor(TokenRecorder):
    def __init__(self, eos_token_ids: list[int], max_model_len: int, rows: bool = True):
        super().__init__(None, eos_token_ids, max_model_len)
        self.rows = rows  # False: every advance a RequestDelta (benchmarks' peer)
        self._sent: dict[int, int] = {}  # seq_id -> generated tokens already sent
        self._rows = TokenRows()

    def take_rows(self) -> TokenRows | None:
        """The rows gathered since the last call (None for none)."""
        rows = self._rows
        if not rows.request_ids:
            return None
        self._rows = TokenRows()
        return rows

    def request_output(self, req: Request) -> RequestDelta | None:
        """Called by LLMEngine.step() for every request that advanced, and by abort(); None when
        the advance went into the step's rows instead."""
        finished = req.is_finished
        m = req.metrics
        if self.rows and not finished and len(req.seqs) == 1 and self._row(req, req.seqs[0]):
            return None
        if finished and m.finished_time is None:
            m.finished_time = time.monotonic()
        seqs = req.seqs if len(req.seqs) == 1 else sorted(req.seqs, key=lambda s: s.index)
        delta = RequestDelta(
            request_id=req.request_id,
            seqs=[self._seq_delta(s) for s in seqs],
            finished=finished,
            first_scheduled_time=m.first_scheduled_time,
            first_token_time=m.first_token_time,
            last_token_time=m.last_token_time,
            finished_time=m.finished_time,
            num_preemptions=m.num_preemptions,
            num_cached_prompt_tokens=m.num_cached_prompt_tokens,
        )
        if finished:
            k = req.params.prompt_logprobs
            if k is not None and len(req.prompt_logprob_rows) >= len(req.prompt_token_ids) - 1:
                delta.prompt_logprobs = [
                    (int(t), float(lp), [(int(a), float(b)) for a, b in top[:k]])
                    for t, lp, top in req.prompt_logprob_rows
                ]
            for s in req.seqs:
                self._sent.pop(s.seq_id, None)
        return delta

    def _row(self, req: Request, seq: Sequence) -> bool:
        """One new token of a running one-sequence request whose first token went already, with
        nothing a row cannot carry (top logprobs, n > 1, a preemption count to report)."""
        start = self._sent.get(seq.seq_id)
        end = len(seq.logprobs)
        params = req.params
        if (
            start is None
            or end - start != 1
            or params.n != 1
            or params.logprobs is not None
            or req.metrics.num_preemptions
        ):
            return False
        self._sent[seq.seq_id] = end
        self._rows.add(
            req.request_id,
            seq.token_ids[seq.num_prompt_tokens + start],
            seq.logprobs[start],
            seq.entropies[start],
            req.metrics.last_token_time or 0.0,  # set by the engine before any output
        )
        return True

    def _seq_delta(self, seq: Sequence) -> SeqDelta:
        start = self._sent.get(seq.seq_id, 0)
        end = len(seq.logprobs)
        self._sent[seq.seq_id] = end
        base = seq.num_prompt_tokens
        top = None
        if seq.request.params.logprobs is not None:
            top = [[(t, lp) for t, _, lp in entry.top] for entry in seq.token_logprobs[start:end]]
        stop = seq.stop_reason if isinstance(seq.stop_reason, int) else None
        return SeqDelta(
            index=seq.index,
            token_ids=seq.token_ids[base + start : base + end],
            logprobs=seq.logprobs[start:end],
            entropies=seq.entropies[start:end],
            top=top,
            finish_reason=seq.finish_reason,
            stop_reason=stop,
        )


def token_deltas(rows: bool = True) -> OutputFactory[RequestDelta]:
    """The engine-core process's sink, for `LLMEngine(..., output=token_deltas())`."""

    def make(tokenizer: Any, eos_token_ids: list[int], max_model_len: int) -> TokenDeltaProcessor:
        return TokenDeltaProcessor(eos_token_ids, max_model_len, rows=rows)

    return make
