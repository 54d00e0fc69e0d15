"""Render a Jinja2 chat template the way HF transformers does (sandboxed, same globals/filters),
after checking the messages so a bad request gets a clear ValueError instead of a template crash."""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROLES = ("system", "developer", "user", "assistant", "tool")


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson escapes HTML characters; chat templates expect plain JSON
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=16)
def compile_template(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        raise ValueError(f"chat template has a syntax error: {exc}") from exc


def _content_text(i: int, content: Any) -> str:
    """OpenAI allows content as a list of parts; we render text parts only, joined by newlines."""
    texts = []
    for j, part in enumerate(content):
        if (
            not isinstance(part, dict)
            or part.get("type") != "text"
            or not isinstance(part.get("text"), str)
        ):
            raise ValueError(
                f"messages[{i}].content[{j}]: only text parts ({{'type': 'text', 'text': ...}}) "
                "are supported"
            )
        texts.append(part["text"])
    return "\n".join(texts)


def normalize_messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"messages[{i}] must be a dict, got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role must be one of {', '.join(ROLES)}; got {role!r}")
        # drop None values, as transformers does (templates handle a missing key, not a None)
        msg = {k: v for k, v in message.items() if v is not None}
        content = msg.get("content")
        if isinstance(content, list):
            msg["content"] = _content_text(i, content)
        elif content is None:
            if not (role == "assistant" and msg.get("tool_calls")):
                raise ValueError(f"messages[{i}] ({role}) has no content")
        elif not isinstance(content, str):
            raise ValueError(
                f"messages[{i}].content must be a string or a list of text parts, got "
                f"{type(content).__name__}"
            )
        out.append(msg)
    return out


def render_chat_template(
    template: str,
    messages: list[dict[str, Any]],
    *,
    add_generation_prompt: bool = True,
    tools: list[dict[str, Any]] | None = None,
    special_tokens: dict[str, str] | None = None,
    **extra: Any,
) -> str:
    msgs = normalize_messages(messages)
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)
    ):
        raise ValueError("tools must be a list of JSON-schema dicts")
    compiled = compile_template(template)
    try:
        return compiled.render(
            messages=msgs,
            tools=tools,
            documents=None,
            add_generation_prompt=add_generation_prompt,
            **(special_tokens or {}),
            **extra,
        )
    except jinja2.exceptions.TemplateError as exc:
        raise ValueError(f"chat template rejected the messages: {exc}") from exc
