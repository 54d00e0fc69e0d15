"""POST /v1/completions: a prompt string, a list of strings, token ids, or lists of token ids.
Several prompts run as several engine requests; choice index = prompt index * n + sample index."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from functools import partial

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from serving.outputs import CompletionOutput, RequestOutput, TokenLogprob
from serving.server.api.generation import (
    ClientDisconnected,
    admitted,
    collect_final,
    encode,
    ensure_accepting,
    generate,
    merge,
    unless_disconnected,
    validate,
)
from serving.server.api.params import (
    DEFAULT_COMPLETION_MAX_TOKENS,
    add_token_ids,
    build_params,
    check_context,
)
from serving.server.api.protocol import CompletionRequest
from serving.server.base.auth import request_segment
from serving.server.base.errors import APIError, in_band
from serving.server.base.offload import run_sized
from serving.server.base.sse import DONE, EventTemplate, SSEResponse, event, safe_logprob
from serving.server.base.state import ServerState


def _logprobs(items: Sequence[TokenLogprob], offset: int) -> dict:
    """The legacy completions logprobs object; `offset` = characters of text before these."""
    offsets = []
    for t in items:
        offsets.append(offset)
        offset += len(t.token)
    return {
        "tokens": [t.token for t in items],
        "token_logprobs": [safe_logprob(t.logprob) for t in items],
        "top_logprobs": [{tok: safe_logprob(lp) for _, tok, lp in t.top} for t in items],
        "text_offset": offsets,
    }


def _prompt(state: ServerState, prompt: str | list[int]) -> tuple[str, list[int]]:
    if isinstance(prompt, str):
        return prompt, encode(state, prompt, "prompt")
    try:
        text = state.tokenizer.decode(prompt, skip_special_tokens=False)
    except (ValueError, TypeError, OverflowError, IndexError) as exc:
        raise APIError(f"prompt: token ids could not be decoded ({exc})", param="prompt") from None
    return text, list(prompt)


async def completions(request: Request, body: CompletionRequest, state: ServerState) -> Response:
    ensure_accepting(state, body.model)
    base_id = f"cmpl-{uuid.uuid4().hex}"
    segment = request_segment(request, state.settings, body.user, body.metadata)
    jobs = []
    raw_prompts = body.prompts()
    prepared = await run_sized(
        lambda: [_prompt(state, raw) for raw in raw_prompts], sum(len(raw) for raw in raw_prompts)
    )
    # again: the queue may have filled while we tokenized; no await from here until the
    # request is counted (admitted), so a burst cannot pass this check all at once
    ensure_accepting(state, body.model)
    for k, (text, ids) in enumerate(prepared):
        check_context(len(ids), state.max_model_len, "prompt")
        params = build_params(
            body,
            prompt_len=len(ids),
            max_model_len=state.max_model_len,
            max_tokens=body.max_tokens,
            default_max_tokens=DEFAULT_COMPLETION_MAX_TOKENS,
            logprobs=body.logprobs,
        )
        if body.echo:  # legacy echo: the prompt's own logprobs come back too (first one null)
            params.prompt_logprobs = body.logprobs
        request_id = f"{base_id}-{k}"
        validate(state, request_id, ids, params, "prompt")
        jobs.append((request_id, ids, params, text))
    streams = [
        admitted(
            state, rid, generate(state, rid, ids, params, prompt=text, segment=segment, tools=[])
        )
        for rid, ids, params, text in jobs
    ]
    created, n = int(time.time()), body.n
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return SSEResponse(
            _chunks(streams, base_id, created, body.model, n, body.logprobs, include_usage)
        )
    try:
        finals = await unless_disconnected(request, collect_final(streams))
    except ClientDisconnected:
        return Response(status_code=499)
    choices = [
        _echoed(state, k * n + c.index, c, out, body.logprobs)
        if body.echo
        else _choice(k * n + c.index, c, c.text, c.logprobs, 0, body.logprobs)
        for k, out in enumerate(finals)
        for c in sorted(out.outputs, key=lambda c: c.index)
    ]
    if body.return_token_ids:
        add_token_ids(choices, [finals[choice["index"] // n] for choice in choices])
    return JSONResponse(
        {
            "id": base_id,
            "object": "text_completion",
            "created": created,
            "model": body.model,
            "choices": choices,
            "usage": _usage(finals),
            "system_fingerprint": None,
        }
    )


def _choice(
    index: int,
    c: CompletionOutput,
    text: str,
    lps: Sequence[TokenLogprob] | None,
    offset: int,
    logprobs: int | None,
) -> dict:
    return {
        "index": index,
        "text": text,
        "logprobs": _logprobs(lps or [], offset) if logprobs is not None else None,
        "finish_reason": c.finish_reason,
    }


def _echoed(
    state: ServerState, index: int, c: CompletionOutput, out: RequestOutput, logprobs: int | None
) -> dict:
    """`echo`: the prompt's text before the completion's; with `logprobs`, the prompt tokens'
    entries first (the first token's logprob and alternatives null: nothing precedes it)."""
    prompt = out.prompt or ""
    choice = _choice(index, c, prompt + c.text, c.logprobs, len(prompt), logprobs)
    if logprobs is None:
        return choice
    scored = out.prompt_logprobs or []
    first = out.prompt_token_ids[0]
    head = state.tokenizer.id_to_bytes(first).decode("utf-8", errors="backslashreplace")
    tail = _logprobs([t for t in scored[1:] if t is not None], len(head))
    generated = choice["logprobs"]
    choice["logprobs"] = {
        "tokens": [head, *tail["tokens"], *generated["tokens"]],
        "token_logprobs": [None, *tail["token_logprobs"], *generated["token_logprobs"]],
        "top_logprobs": [None, *tail["top_logprobs"], *generated["top_logprobs"]],
        "text_offset": [0, *tail["text_offset"], *generated["text_offset"]],
    }
    return choice


def _usage(outputs: list[RequestOutput]) -> dict:
    prompt = sum(len(o.prompt_token_ids) for o in outputs)
    completion = sum(len(c.token_ids) for o in outputs for c in o.outputs)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _text_event(base: dict, usage_field: dict, index: int, finish: str | None, text: str) -> dict:
    """A chunk without logprobs: `_choice` of `text` (same keys, same order)."""
    return {
        **base,
        "choices": [{"index": index, "text": text, "logprobs": None, "finish_reason": finish}],
        **usage_field,
    }


async def _chunks(
    streams: list[AsyncIterator[RequestOutput]],
    request_id: str,
    created: int,
    model: str,
    n: int,
    logprobs: int | None,
    include_usage: bool,
) -> AsyncIterator[str]:
    """One item per engine output (its choices' events together); the last output's events go
    out with the usage event and [DONE]."""
    base = {"id": request_id, "object": "text_completion", "created": created, "model": model}
    usage_field = {"usage": None} if include_usage else {}
    templates: dict[tuple[int, str | None], EventTemplate] = {}
    sent_text: dict[int, int] = {}
    sent_lp: dict[int, int] = {}
    done: set[int] = set()
    finals: dict[int, RequestOutput] = {}
    held = ""  # the last output's events: sent with the end of the stream
    try:
        async for k, out in merge(streams):
            finals[k] = out
            events = []
            for c in sorted(out.outputs, key=lambda c: c.index):
                index = k * n + c.index
                if index in done:
                    continue
                start, lp_start = sent_text.get(index, 0), sent_lp.get(index, 0)
                text, new_lps = c.text[start:], (c.logprobs or [])[lp_start:]
                if not (text or new_lps or c.finished):
                    continue
                sent_text[index], sent_lp[index] = start + len(text), lp_start + len(new_lps)
                if c.finished:
                    done.add(index)
                if logprobs is None:  # the common case: only the text differs between events
                    key = (index, c.finish_reason)
                    if key not in templates:
                        templates[key] = EventTemplate(
                            partial(_text_event, base, usage_field, *key)
                        )
                    events.append(templates[key].fill(text))
                else:
                    choice = _choice(index, c, text, new_lps, start, logprobs)
                    events.append(event({**base, "choices": [choice], **usage_field}))
            if len(done) == len(streams) * n:  # nothing follows but the stream's end
                held += "".join(events)
            elif events:
                yield "".join(events)
        if include_usage:
            held += event({**base, "choices": [], "usage": _usage(list(finals.values()))})
    except Exception as exc:
        held += event(in_band(exc))
    yield held + DONE
