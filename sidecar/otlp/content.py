"""Prompt, response and tool names from a span's content, in any of the shapes the GenAI
conventions have used: `gen_ai.input.messages` / `gen_ai.output.messages` /
`gen_ai.system_instructions` (1.37+, message objects with `parts`), whole-text
`gen_ai.prompt` / `gen_ai.completion`, indexed `gen_ai.prompt.<i>.content`, and span events."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.otlp import names
from sidecar.otlp.values import attributes, structured, text

_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d{1,4})\.(content|role|finish_reason)$")


@dataclass
class Content:
    prompt: str | None = None
    response: str | None = None
    finish_reason: str | None = None
    tools: list[str] = field(default_factory=list)


def _parts_text(parts: Any, tools: list[str]) -> list[str]:
    out: list[str] = []
    for part in parts if isinstance(parts, list) else [parts]:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind == "tool_call" and isinstance(part.get("name"), str):
                tools.append(part["name"])
            value = part.get("content", part.get("text"))
            if kind in (None, "text") and isinstance(value, str):
                out.append(value)
    return out


def _messages_text(value: Any, tools: list[str]) -> tuple[str | None, str | None]:
    """Text of a message list (or of one message, or of a bare string) and its first finish
    reason."""
    value = structured(value)
    if isinstance(value, str):
        return value, None
    messages = value if isinstance(value, list) else [value]
    pieces: list[str] = []
    finish = None
    for message in messages:
        if isinstance(message, str):
            pieces.append(message)
            continue
        if not isinstance(message, dict):
            continue
        if "parts" in message:
            pieces += _parts_text(message["parts"], tools)
        elif "content" in message or "text" in message:
            pieces += _parts_text(message.get("content", message.get("text")), tools)
        elif message.get("type") in (None, "text"):
            pieces += _parts_text(message, tools)
        finish = finish or (
            message.get("finish_reason") if isinstance(message.get("finish_reason"), str) else None
        )
    return ("\n".join(pieces) if pieces else None), finish


def _indexed(attrs: Mapping[str, Any], kind: str) -> tuple[str | None, str | None]:
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = _INDEXED.match(key)
        if match and match.group(1) == kind:
            found.setdefault(int(match.group(2)), {})[match.group(3)] = value
    texts = [str(found[i]["content"]) for i in sorted(found) if found[i].get("content") is not None]
    reasons = [
        found[i]["finish_reason"]
        for i in sorted(found)
        if isinstance(found[i].get("finish_reason"), str)
    ]
    return ("\n".join(texts) if texts else None), (reasons[0] if reasons else None)


def _events(events: Iterable[Any], kinds: frozenset[str], tools: list[str]) -> str | None:
    pieces = []
    for event in events:
        if event.name not in kinds:
            continue
        attrs = attributes(event.attributes)
        value = attrs.get("gen_ai.input.messages") or attrs.get("gen_ai.output.messages")
        if value is None:
            value = next((attrs[k] for k in names.EVENT_TEXT if attrs.get(k) is not None), None)
        if value is not None:
            piece, _ = _messages_text(value, tools)
            if piece:
                pieces.append(piece)
    return "\n".join(pieces) if pieces else None


def span_content(attrs: Mapping[str, Any], events: Iterable[Any]) -> Content:
    tools: list[str] = []
    system, _ = (
        _messages_text(attrs[names.SYSTEM_INSTRUCTIONS], tools)
        if names.SYSTEM_INSTRUCTIONS in attrs
        else (None, None)
    )
    prompt, _ = (
        _messages_text(attrs[names.INPUT_MESSAGES], tools)
        if names.INPUT_MESSAGES in attrs
        else (None, None)
    )
    response, finish = (
        _messages_text(attrs[names.OUTPUT_MESSAGES], tools)
        if names.OUTPUT_MESSAGES in attrs
        else (None, None)
    )
    if prompt is None:
        prompt = text(attrs, names.PROMPT_TEXT) or _indexed(attrs, "prompt")[0]
    if response is None:
        response = text(attrs, names.COMPLETION_TEXT)
        if response is None:
            response, finish = _indexed(attrs, "completion")
    events = list(events)
    if prompt is None and events:
        prompt = _events(events, names.PROMPT_EVENTS, tools)
    if response is None and events:
        response = _events(events, names.COMPLETION_EVENTS, tools)
    if system and prompt is not None:
        prompt = f"{system}\n{prompt}"
    return Content(prompt=prompt, response=response, finish_reason=finish, tools=tools)
