"""The API process's fold of one engine-core `StepOutputs` into its live requests: each request's
deltas (or its one-token row) become text and outputs (`FrontRequest`), grouped by the event loop
of the stream that waits for them; requests a stop string finished here are listed for an abort
in the core, which is still running them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from serving.engine.frontend.async_engine import EngineStepError
from serving.engine.frontend.messages import StepOutputs
from serving.engine.frontend.output_slot import OutputSlot
from serving.engine.frontend.request_text import FrontRequest, next_output, output_for
from serving.outputs import RequestOutput

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
        if live is not None:  # else already answered (stop string, abort): the core's echo
            _hand(
                requests,
                delta.request_id,
                live,
                next_output(live.front, live.slot, delta),
                delta.finished,
                per_loop,
                stop_aborts,
            )
    if msg.rows is not None:
        for rid, token_id, logprob, entropy, token_time in msg.rows.entries():
            live = requests.get(rid)
            if live is not None:  # a row never finishes a request in the core
                finished = live.front.fold_token(token_id, logprob, entropy, token_time)
                _hand(
                    requests,
                    rid,
                    live,
                    output_for(live.front, live.slot, finished),
                    False,
                    per_loop,
                    stop_aborts,
                )
    for failure in msg.failed:
        live = requests.pop(failure.request_id, None)
        if live is not None:
            exc = (
                ValueError(failure.message)
                if failure.bad_request
                else EngineStepError(f"the engine step failed: {failure.message}")
            )
            per_loop.setdefault(live.loop, []).append((live.slot, exc))
    return per_loop, stop_aborts


def _hand(
    requests: dict[str, LiveRequest],
    rid: str,
    live: LiveRequest,
    out: RequestOutput | None,
    core_finished: bool,
    per_loop: PerLoop,
    stop_aborts: list[str],
) -> None:
    """Queue `out` for its stream (None: the reader is behind, the next output carries this
    text); a request finished here but not in the core (a stop string) is listed for an abort."""
    if out is None:
        return
    if out.finished:
        del requests[rid]
        if not core_finished:
            stop_aborts.append(rid)
    per_loop.setdefault(live.loop, []).append((live.slot, out))
