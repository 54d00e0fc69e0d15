"""The API layer's side of one engine request: admission checks, the token stream with its
bookkeeping (in-flight set, inter-token latency, finish metrics, traffic logging), merging of
several prompts' streams, and aborting when the client goes away."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from fastapi import Request

from serving.outputs import RequestOutput
from serving.sampling_params import SamplingParams, SamplingParamsError
from serving.server.base.coalesce import latest_only
from serving.server.base.errors import APIError
from serving.server.base.state import Phase, ServerState
from serving.traffic.logger import FinishedRequest
from serving.traffic.segments import SegmentInfo

log = logging.getLogger(__name__)
T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client closed the connection before the response was ready."""


def ensure_accepting(state: ServerState, model: str) -> None:
    """Admission: right model, server ready, waiting queue not full."""
    if state.phase is Phase.DRAINING or state.phase is Phase.STOPPED:
        raise APIError(
            "the server is shutting down; retry on another replica",
            status=503,
            code="server_draining",
        )
    if state.phase is Phase.RECOVERING:
        raise APIError(
            "the engine is restarting; retry shortly", status=503, code="engine_restarting"
        )
    if state.phase is not Phase.READY or state.engine is None:
        failed = state.phase is Phase.FAILED  # the reason is in the server log, not for clients
        raise APIError(
            "the model could not be loaded" if failed else "the model is not loaded yet",
            status=503,
            code="model_loading",
        )
    if model != state.settings.model_name:
        raise APIError(
            f"The model `{model}` does not exist. This server serves "
            f"`{state.settings.model_name}`.",
            param="model",
            code="model_not_found",
        )
    if state.engine.num_waiting() + len(state.reserved) >= state.settings.max_waiting_requests:
        raise APIError(
            f"too many requests waiting ({state.settings.max_waiting_requests}); retry later",
            status=429,
            code="queue_full",
        )


def encode(state: ServerState, text: str, param: str) -> list[int]:
    try:
        return list(state.tokenizer.encode(text))
    except (ValueError, TypeError, UnicodeError) as exc:  # e.g. lone surrogates in the JSON
        raise APIError(f"{param}: the text could not be tokenized ({exc})", param=param) from None


def validate(
    state: ServerState, request_id: str, token_ids: list[int], params: SamplingParams, param: str
) -> None:
    """Ask the engine (a pure check) so a bad request is a 400 before any stream starts."""
    try:
        state.loaded_engine().validate_request(request_id, token_ids, params)
    except SamplingParamsError as exc:
        raise APIError(str(exc), param=exc.param) from None
    except ValueError as exc:
        raise APIError(str(exc), param=param) from None


def _aborted(out: RequestOutput) -> RequestOutput:
    choices = [
        c if c.finished else dataclasses.replace(c, finish_reason="abort") for c in out.outputs
    ]
    metrics = dataclasses.replace(
        out.metrics, finished_time=out.metrics.finished_time or time.monotonic()
    )
    return dataclasses.replace(out, outputs=choices, finished=True, metrics=metrics)


def admitted(
    state: ServerState, request_id: str, stream: AsyncIterator[RequestOutput]
) -> AsyncIterator[RequestOutput]:
    """Count a request as waiting from its admission on: its stream reaches the engine only when
    iterated, and a burst of requests all passed the queue check before any was counted. The
    stream's start (or its disposal unstarted) hands the count over to the engine's."""
    state.reserved.add(request_id)
    weakref.finalize(stream, state.reserved.discard, request_id)
    return stream


async def generate(
    state: ServerState,
    request_id: str,
    token_ids: list[int],
    params: SamplingParams,
    *,
    prompt: str | None,
    segment: SegmentInfo,
    tools: list[str],
) -> AsyncIterator[RequestOutput]:
    """Stream one engine request; on finish (or abort) record metrics and hand it to the sampler."""
    state.inflight.add(request_id)
    state.reserved.discard(request_id)  # the engine counts it from the next line on
    # a stalled client holds one output, not every step's: Vigil's engines coalesce at the
    # source; any other engine's stream is drained here at its own speed, newest output kept
    engine = state.loaded_engine()
    stream = engine.generate(request_id, token_ids, params, prompt=prompt)
    if not engine.coalesces_outputs:
        stream = latest_only(stream)
    last: RequestOutput | None = None
    last_token_at: float | None = None
    steps_seen = 0  # tokens of the longest choice so far: one per engine step that sampled
    try:
        while True:
            try:  # (not an `async for` over a wrapping generator: one layer less per token)
                out = await anext(stream)
            except StopAsyncIteration:
                break
            except Exception as exc:
                mapped = api_error(exc)
                if mapped is None:
                    raise
                raise mapped from None
            steps = max((len(c.token_ids) for c in out.outputs), default=0)
            if steps > steps_seen:
                now = time.monotonic()
                _observe_intervals(state, out, steps - steps_seen, last_token_at, now)
                steps_seen, last_token_at = steps, now
            last = out
            if out.finished:
                _finished(state, out, segment, tools)
            yield out
    finally:
        state.inflight.discard(request_id)
        if last is None or not last.finished:  # cancelled: client gone, drain timeout, error
            engine.abort(request_id)
            if last is not None:
                _finished(state, _aborted(last), segment, tools)
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def _observe_intervals(
    state: ServerState, out: RequestOutput, new_steps: int, last_token_at: float | None, now: float
) -> None:
    """One inter-token interval per step after the first token, also when one output carries
    several (a stream that fell behind gets them coalesced): the time since the previous output
    is shared out, and within the first output the engine's own first-to-last token span."""
    if last_token_at is not None:
        state.metrics.observe_token_intervals(now - last_token_at, new_steps)
    elif new_steps > 1:
        m = out.metrics
        span = (
            m.last_token_time - m.first_token_time
            if m.first_token_time and m.last_token_time
            else 0.0
        )
        state.metrics.observe_token_intervals(span, new_steps - 1)


def api_error(exc: Exception) -> APIError | None:
    """The engine's refusals as API errors: a bad request is a 400, a stopped engine a 503, an
    engine core that died under the request or a failed engine step a 500; None for others."""
    from serving.engine.frontend.async_engine import EngineNotRunningError, EngineStepError
    from serving.engine.frontend.core_requests import EngineDeadError

    if isinstance(exc, EngineNotRunningError):
        return APIError(str(exc), status=503, code="engine_not_running")
    if isinstance(exc, EngineDeadError):
        return APIError(str(exc), status=500, code="engine_dead")
    if isinstance(exc, EngineStepError):
        return APIError(str(exc), status=500, code="engine_step_failed")
    if isinstance(exc, ValueError):
        return APIError(str(exc), code="invalid_request")
    return None


def _finished(
    state: ServerState, out: RequestOutput, segment: SegmentInfo, tools: list[str]
) -> None:
    try:
        state.metrics.observe_finished(out)
        state.traffic.log(FinishedRequest(out, segment, tools, end_time=time.time()))
    except Exception:  # bookkeeping must never break a response
        log.exception("could not record request %s", out.request_id)


async def merge(streams: list[AsyncIterator[T]]) -> AsyncIterator[tuple[int, T]]:
    """Interleave several streams as items arrive: (stream index, item)."""
    if len(streams) == 1:
        async for item in streams[0]:
            yield 0, item
        return
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def pump(i: int, stream: AsyncIterator[T]) -> None:
        try:
            async for item in stream:
                queue.put_nowait((i, item))
        except Exception as exc:
            queue.put_nowait((i, exc))
        finally:
            queue.put_nowait((i, done))

    tasks = [asyncio.create_task(pump(i, s)) for i, s in enumerate(streams)]
    try:
        remaining = len(tasks)
        while remaining:
            i, item = await queue.get()
            if item is done:
                remaining -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield i, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def collect_final(streams: list[AsyncIterator[RequestOutput]]) -> list[RequestOutput]:
    finals: dict[int, RequestOutput] = {}
    async for i, out in merge(streams):
        finals[i] = out
    return [finals[i] for i in range(len(streams))]


async def _until_disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Run `work`, cancelling it (and so aborting its engine requests) if the client leaves."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_until_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise ClientDisconnected()
