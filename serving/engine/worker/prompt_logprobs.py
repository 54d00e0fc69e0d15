"""Prompt logprobs (OpenAI legacy `echo` + `logprobs`): during prefill, the logits of every prompt
row of a request that asks for them score the next prompt token.

Rows are laid out as `build_step_inputs` lays them out: sequences running one token first, then
the others, each group in scheduled order. A preempted sequence recomputes its prompt; positions
already scored are not scored again.
"""

from __future__ import annotations

import torch

from serving.engine.core.scheduler import ScheduledSeq


def row_starts(scheduled: list[ScheduledSeq]) -> list[int]:
    """The first hidden-state row of each scheduled item (the step's token layout)."""
    order = [i for i, s in enumerate(scheduled) if s.num_new_tokens == 1]
    order += [i for i, s in enumerate(scheduled) if s.num_new_tokens != 1]
    starts = [0] * len(scheduled)
    row = 0
    for i in order:
        starts[i] = row
        row += scheduled[i].num_new_tokens
    return starts


def wants_prompt_logprobs(scheduled: list[ScheduledSeq]) -> bool:
    return any(
        s.seq.request.params.prompt_logprobs is not None
        and s.seq.num_computed_tokens < s.seq.num_prompt_tokens - 1
        for s in scheduled
    )


def record_prompt_logprobs(model, hidden: torch.Tensor, scheduled: list[ScheduledSeq]) -> None:
    """Append this step's prompt-token scores to each asking request's `prompt_logprob_rows`."""
    starts = row_starts(scheduled)
    for item, first_row in zip(scheduled, starts, strict=True):
        seq = item.seq
        req = seq.request
        k = req.params.prompt_logprobs
        if k is None:
            continue
        # row at position p scores token p + 1; only prompt tokens, only positions not yet scored
        begin = max(seq.num_computed_tokens, len(req.prompt_logprob_rows))
        end = min(seq.num_computed_tokens + item.num_new_tokens, seq.num_prompt_tokens - 1)
        if begin >= end:
            continue
        offset = first_row - seq.num_computed_tokens
        logits = model.compute_logits(hidden[begin + offset : end + offset])
        logprobs = torch.log_softmax(logits, dim=-1)
        targets = torch.tensor(seq.token_ids[begin + 1 : end + 1], device=logprobs.device)
        chosen = logprobs.gather(1, targets[:, None]).squeeze(1).tolist()
        if k > 0:
            top_values, top_ids = logprobs.topk(k, dim=-1)
            tops = [
                list(zip(ids, vals, strict=True))
                for ids, vals in zip(top_ids.tolist(), top_values.tolist(), strict=True)
            ]
        else:
            tops = [[] for _ in chosen]
        for target, lp, top in zip(targets.tolist(), chosen, tops, strict=True):
            req.prompt_logprob_rows.append((target, lp, top))
