"""OpenInference spans (Arize Phoenix's conventions) as GenAI attributes, so one mapping
(sidecar.otlp.spans) reads both.

An OpenInference span says its kind in `openinference.span.kind`; only `LLM` spans are one
model generation. Their content: `llm.input_messages.<i>.message.role/content` (or
`.message.contents.<j>.message_content.text`) and `llm.output_messages.*` (with
`.message.tool_calls.<j>.tool_call.function.name`), else `input.value` / `output.value` read by
their `*.mime_type` (an OpenAI request or response body as JSON, or plain text). Tokens from
`llm.token_count.prompt/completion`, the model from `llm.model_name` (or the invocation
parameters), the provider from `llm.provider` / `llm.system`; `session.id` and `user.id` are
read by the common names already.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sidecar.otlp.values import structured

KIND = "openinference.span.kind"
_MESSAGE = re.compile(
    r"^llm\.(input|output)_messages\.(\d{1,4})\.message\."
    r"(role|content|contents\.(\d{1,4})\.message_content\.text"
    r"|tool_calls\.(\d{1,4})\.tool_call\.function\.name)$"
)


def span_kind(attrs: Mapping[str, Any]) -> str | None:
    kind = attrs.get(KIND)
    return kind.upper() if isinstance(kind, str) else None


def _messages(attrs: Mapping[str, Any], side: str) -> list[dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = _MESSAGE.match(key)
        if not match or match.group(1) != side or not isinstance(value, str):
            continue
        message = found.setdefault(int(match.group(2)), {"parts": {}})
        field = match.group(3)
        if field == "role":
            message["role"] = value
        elif field == "content":
            message["parts"][(-1, 0)] = {"type": "text", "content": value}
        elif match.group(4) is not None:
            message["parts"][(int(match.group(4)), 0)] = {"type": "text", "content": value}
        else:
            message["parts"][(int(match.group(5)), 1)] = {"type": "tool_call", "name": value}
    return [
        {
            "role": found[i].get("role", "user"),
            "parts": [p for _, p in sorted(found[i]["parts"].items())],
        }
        for i in sorted(found)
    ]


def _openai_messages(body: Any) -> list[dict[str, Any]] | None:
    """The messages of an OpenAI chat request body, in the GenAI parts shape."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    out = []
    for message in body["messages"]:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            parts = [
                {"type": "text", "content": p["text"]}
                for p in content
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
        else:
            parts = [{"type": "text", "content": content}] if isinstance(content, str) else []
        out.append({"role": str(message.get("role", "user")), "parts": parts})
    return out


def _openai_choice_text(body: Any) -> tuple[str | None, str | None]:
    """The first choice's text and finish reason of an OpenAI chat response body."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return None, None
    for choice in body["choices"]:
        if isinstance(choice, dict):
            message = choice.get("message") or choice.get("delta") or {}
            text = message.get("content") if isinstance(message, dict) else None
            reason = choice.get("finish_reason")
            return (text if isinstance(text, str) else None), (
                reason if isinstance(reason, str) else None
            )
    return None, None


def _value(attrs: Mapping[str, Any], side: str) -> Any:
    value = attrs.get(f"{side}.value")
    if not isinstance(value, str):
        return None
    mime = attrs.get(f"{side}.mime_type")
    return structured(value) if mime == "application/json" else value


def genai_attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The GenAI attributes an OpenInference LLM span stands for (its own keys kept)."""
    out: dict[str, Any] = dict(attrs)
    out["gen_ai.operation.name"] = "chat"
    provider = attrs.get("llm.provider") or attrs.get("llm.system")
    if isinstance(provider, str):
        out["gen_ai.provider.name"] = provider
    params = structured(attrs.get("llm.invocation_parameters"))
    model = attrs.get("llm.model_name")
    if model is None and isinstance(params, dict):
        model = params.get("model")
    if isinstance(model, str):
        out["gen_ai.response.model"] = model
    for source, target in (
        ("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
        ("llm.token_count.completion", "gen_ai.usage.output_tokens"),
    ):
        if source in attrs:
            out[target] = attrs[source]
    finish = attrs.get("llm.finish_reason")
    inputs = _messages(attrs, "input") or _openai_messages(_value(attrs, "input"))
    outputs = _messages(attrs, "output")
    if inputs:
        out["gen_ai.input.messages"] = json.dumps(inputs)
    elif isinstance(_value(attrs, "input"), str):
        out["gen_ai.prompt"] = _value(attrs, "input")
    if outputs:
        out["gen_ai.output.messages"] = json.dumps(outputs)
    else:
        response = _value(attrs, "output")
        text, reason = _openai_choice_text(response)
        finish = finish or reason
        if text is None and isinstance(response, str):
            text = response
        if text is not None:
            out["gen_ai.completion"] = text
    if isinstance(finish, str):
        out["gen_ai.response.finish_reasons"] = [finish]
    return out
