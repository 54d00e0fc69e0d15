"""The API process's fold of one engine-core `StepOutputs` into its live requests: each request's
deltas (or its one-token row) become text and outputs (`FrontRequest`), grouped by the event loop
of the stream that waits for them; requests a stop string finished here are listed for an abort
in the core, which is still running them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from serving.engine.async_engine import EngineStepError
from serving.engine.frontend_outputs import FrontRequest, next_output, output_for
from serving.engine.messages import StepOutputs, TokenRows
from serving.engine.output_slot import OutputSlot

# event loop -> (slot, output or exception) pairs to hand to it
PerLoop = dict[asyncio.AbstractEventLoop, list]


@dataclass(eq=False)
class LiveRequest:
    front: FrontRequest
    slot: OutputSlot
    loop: asyncio.AbstractEventLoop


def fold_step(requests: dict[str, LiveRequest], msg: StepOutputs) -> tuple[PerLoop, list[str]]:
    """Fold `msg` into `requests` (answered ones leave it); returns what to hand to each event
    loop and the ids to abort in the core (stop strings)."""
    per_loop: PerLoop = {}
    stop_aborts: list[str] = []
    for delta in msg.deltas:
        live = requests.get(delta.request_id)
        if live is None:  # already answered (stop string, abort): the core's echo
            continue
        out = next_output(live.front, live.slot, delta)
        if out is None:  # its reader is behind: the next output carries this step's text
            continue
        if out.finished:
            del requests[delta.request_id]
            if not delta.finished:
                stop_aborts.append(delta.request_id)
        per_loop.setdefault(live.loop, []).append((live.slot, out))
    if msg.rows is not None:
        _fold_rows(requests, msg.rows, per_loop, stop_aborts)
    for failure in msg.failed:
        live = requests.pop(failure.request_id, None)
        if live is not None:
            exc = ValueError(failure.message) if failure.bad_request else \
                EngineStepError(f"the engine step failed: {failure.message}")
            per_loop.setdefault(live.loop, []).append((live.slot, exc))
    return per_loop, stop_aborts


def _fold_rows(requests: dict[str, LiveRequest], rows: TokenRows, per_loop: PerLoop, stop_aborts: list[str]) -> None:
    columns = zip(rows.request_ids, rows.token_ids, rows.logprobs, rows.entropies, rows.token_times, strict=True)
    for rid, token_id, logprob, entropy, token_time in columns:
        live = requests.get(rid)
        if live is None:
            continue
        out = output_for(live.front, live.slot, live.front.fold_token(token_id, logprob, entropy, token_time))
        if out is None:
            continue
        if out.finished:  # a stop string: the core never finishes a request in a row
            del requests[rid]
            stop_aborts.append(rid)
        per_loop.setdefault(live.loop, []).append((live.slot, out))
