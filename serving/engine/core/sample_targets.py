"""Who receives the sample of each scheduled row: nobody while a prompt is still being chunked
in, the sequence itself once caught up, and all n continuations of a request whose prompt just
finished (its first sequence forks into n, sharing the prompt's KV blocks)."""

from __future__ import annotations

from collections.abc import Callable

from serving.engine.core.request import Request, Sequence
from serving.engine.core.scheduler import Scheduler, SchedulerOutput

Fork = tuple[Sequence, list[Sequence]]  # (parent, its new children)


def sample_targets(
    out: SchedulerOutput, new_seq: Callable[[Request, int], Sequence], now: float
) -> tuple[list[list[Sequence]], list[Fork]]:
    """`targets[i]`: the sequences sampled from scheduled[i]'s last row; the forks to apply
    once the step is scheduled. Stamps each request's first scheduled time."""
    targets: list[list[Sequence]] = []
    forks: list[Fork] = []
    for item in out.scheduled:
        seq = item.seq
        req = seq.request
        if req.metrics.first_scheduled_time is None:
            req.metrics.first_scheduled_time = now
        if seq.num_computed_tokens + item.num_new_tokens != len(seq.token_ids):  # not caught up
            targets.append([])
        elif not req.forked:  # the prompt is done: sample all n continuations from its logits
            children = [new_seq(req, j) for j in range(1, req.params.n)]
            forks.append((seq, children))
            targets.append([seq, *children])
        else:
            targets.append([seq])
    return targets, forks


def apply_forks(scheduler: Scheduler, forks: list[Fork]) -> None:
    for parent, children in forks:
        for child in children:
            scheduler.fork(parent, child)
        parent.request.seqs.extend(children)
        parent.request.forked = True
