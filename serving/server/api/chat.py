"""POST /v1/chat/completions: messages -> the model's chat template -> tokens -> engine, and
the engine's outputs -> OpenAI `chat.completion` objects or `chat.completion.chunk` events."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from functools import partial

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from serving.outputs import CompletionOutput, RequestOutput, TokenLogprob
from serving.server.api.chat_encoding import encode_chat
from serving.server.api.generation import (
    ClientDisconnected,
    admitted,
    collect_final,
    ensure_accepting,
    generate,
    unless_disconnected,
    validate,
)
from serving.server.api.params import add_token_ids, build_params, check_context
from serving.server.api.protocol import ChatCompletionRequest
from serving.server.base.auth import request_segment
from serving.server.base.errors import APIError, in_band
from serving.server.base.offload import run_sized
from serving.server.base.sse import DONE, EventTemplate, SSEResponse, event, safe_logprob
from serving.server.base.state import ServerState


def tool_names(body: ChatCompletionRequest) -> list[str]:
    """Tools offered in `tools` plus tools called in earlier assistant turns, in order, unique."""
    names = [t.function.name for t in body.tools or []]
    for message in body.messages:
        names += [call.function.name for call in message.tool_calls or []]
    return list(dict.fromkeys(names))


def _template_inputs(body: ChatCompletionRequest) -> tuple[list[dict], list[dict] | None]:
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    tools = [t.model_dump(exclude_none=True) for t in body.tools] if body.tools else None
    return messages, tools


def render_prompt(state: ServerState, body: ChatCompletionRequest) -> str:
    messages, tools = _template_inputs(body)
    try:
        return state.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tools=tools
        )
    except (ValueError, TypeError, KeyError, UnicodeError) as exc:
        raise APIError(f"messages: {exc}", param="messages", code="invalid_messages") from None


def _prepare(state: ServerState, body: ChatCompletionRequest) -> tuple[str, list[int]]:
    """Template and tokens; message texts never become control tokens (see chat_encoding)."""
    messages, tools = _template_inputs(body)
    try:
        return encode_chat(state.tokenizer, messages, tools)
    except (ValueError, TypeError, KeyError, UnicodeError) as exc:
        raise APIError(f"messages: {exc}", param="messages", code="invalid_messages") from None


def _logprob_entries(items: Sequence[TokenLogprob]) -> list[dict]:
    def one(token: str, lp: float) -> dict:
        return {
            "token": token,
            "logprob": safe_logprob(lp),
            "bytes": list(token.encode("utf-8", "replace")),
        }

    return [
        {**one(t.token, t.logprob), "top_logprobs": [one(tok, lp) for _, tok, lp in t.top]}
        for t in items
    ]


def _usage(outputs: list[RequestOutput]) -> dict:
    prompt = sum(len(o.prompt_token_ids) for o in outputs)
    completion = sum(len(c.token_ids) for o in outputs for c in o.outputs)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


async def chat_completions(
    request: Request, body: ChatCompletionRequest, state: ServerState
) -> Response:
    ensure_accepting(state, body.model)
    # templating and tokenizing a long conversation takes milliseconds: then off the loop
    size = sum(len(m.text()) for m in body.messages)
    prompt, token_ids = await run_sized(lambda: _prepare(state, body), size)
    # again: the queue may have filled while we tokenized; no await from here until the
    # request is counted (admitted), so a burst cannot pass this check all at once
    ensure_accepting(state, body.model)
    check_context(len(token_ids), state.max_model_len, "messages")
    limit_param = (
        "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    )
    params = build_params(
        body,
        prompt_len=len(token_ids),
        max_model_len=state.max_model_len,
        max_tokens=body.token_limit(),
        default_max_tokens=None,
        logprobs=(body.top_logprobs or 0) if body.logprobs else None,
        max_tokens_param=limit_param,
    )
    request_id = f"chatcmpl-{uuid.uuid4().hex}"
    validate(state, request_id, token_ids, params, "messages")
    segment = request_segment(request, state.settings, body.user, body.metadata)
    stream = admitted(
        state,
        request_id,
        generate(
            state,
            request_id,
            token_ids,
            params,
            prompt=prompt,
            segment=segment,
            tools=tool_names(body),
        ),
    )
    created = int(time.time())
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return SSEResponse(
            _chunks(stream, request_id, created, body.model, body.logprobs, include_usage)
        )
    try:
        (final,) = await unless_disconnected(request, collect_final([stream]))
    except ClientDisconnected:
        return Response(status_code=499)
    payload = _completion(final, request_id, created, body.model, body.logprobs)
    if body.return_token_ids:
        add_token_ids(payload["choices"], [final] * len(payload["choices"]))
    return JSONResponse(payload)


def _completion(
    out: RequestOutput, request_id: str, created: int, model: str, logprobs: bool
) -> dict:
    def choice(c: CompletionOutput) -> dict:
        return {
            "index": c.index,
            "message": {"role": "assistant", "content": c.text},
            "logprobs": {"content": _logprob_entries(c.logprobs or [])} if logprobs else None,
            "finish_reason": c.finish_reason,
        }

    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice(c) for c in sorted(out.outputs, key=lambda c: c.index)],
        "usage": _usage([out]),
        "system_fingerprint": None,
    }


def _text_event(base: dict, usage_field: dict, index: int, finish: str | None, text: str) -> dict:
    """A content chunk without logprobs."""
    return {
        **base,
        "choices": [
            {"index": index, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
        ],
        **usage_field,
    }


async def _chunks(
    stream: AsyncIterator[RequestOutput],
    request_id: str,
    created: int,
    model: str,
    logprobs: bool,
    include_usage: bool,
) -> AsyncIterator[str]:
    """One item per engine output (its choices' events together); the last output's events go
    out with the usage event and [DONE]."""
    base = {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model}
    usage_field = {"usage": None} if include_usage else {}
    templates: dict[tuple[int, str | None], EventTemplate] = {}
    sent_text: dict[int, int] = {}  # choice index -> characters sent
    sent_lp: dict[int, int] = {}  # choice index -> logprob entries sent
    done: set[int] = set()  # choices whose finish chunk went out
    last: RequestOutput | None = None
    held = ""  # the last output's events: sent with the end of the stream

    def chunk(index: int, delta: dict, lps: list[TokenLogprob] | None, finish: str | None) -> str:
        lp = {"content": _logprob_entries(lps)} if logprobs and lps is not None else None
        return event(
            {
                **base,
                "choices": [
                    {"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}
                ],
                **usage_field,
            }
        )

    def text_chunk(index: int, text: str, finish: str | None) -> str:
        """chunk(index, {"content": text}, [], finish) without logprobs: only the text varies."""
        key = (index, finish)
        if key not in templates:
            templates[key] = EventTemplate(partial(_text_event, base, usage_field, index, finish))
        return templates[key].fill(text)

    try:
        async for out in stream:
            last = out
            events = []
            for c in sorted(out.outputs, key=lambda c: c.index):
                if c.index in done:
                    continue
                if c.index not in sent_text:  # the first chunk of each choice names the role
                    sent_text[c.index], sent_lp[c.index] = 0, 0
                    events.append(chunk(c.index, {"role": "assistant", "content": ""}, None, None))
                text = c.text[sent_text[c.index] :]
                new_lps = (c.logprobs or [])[sent_lp[c.index] :]
                if text or new_lps or c.finished:
                    sent_text[c.index] += len(text)
                    sent_lp[c.index] += len(new_lps)
                    if text and not logprobs:
                        events.append(text_chunk(c.index, text, c.finish_reason))
                    else:
                        delta = {"content": text} if text else {}
                        events.append(chunk(c.index, delta, new_lps, c.finish_reason))
                    if c.finished:
                        done.add(c.index)
            if out.finished:  # every choice has finished: nothing follows but the stream's end
                held += "".join(events)
            elif events:
                yield "".join(events)
        if include_usage and last is not None:
            held += event({**base, "choices": [], "usage": _usage([last])})
    except Exception as exc:  # headers are gone: report in-band, as OpenAI does
        held += event(in_band(exc))
    yield held + DONE
