"""One OTLP log record -> the GenAI content it carries for its span, or why it carries none.

The event is named by the record's `event_name` (or, from older SDKs, its `event.name`
attribute). What current instrumentations emit:

- `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message`: one prompt message each, its text in the body (`{"content": ...}`);
  the official OpenAI instrumentation before the 1.37 conventions, OpenLLMetry's events mode;
- `gen_ai.choice`: one answer (`{"index", "message": {"content"}, "finish_reason"}`);
- `gen_ai.client.inference.operation.details` (1.37+): the whole call in its attributes,
  `gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`;
- `gen_ai.content.prompt` / `gen_ai.content.completion`: whole texts (`gen_ai.prompt` /
  `gen_ai.completion`).

A piece is (part, text, order, finish reason): the part is `system`, `prompt` or `response`;
pieces of one span are joined in order: answers by choice index, then each by the record's time
and its place in the request.
"""

from __future__ import annotations

from typing import Any

from sidecar.otlp.content import _messages_text
from sidecar.otlp.values import attributes, plain

SYSTEM_EVENTS = frozenset({"gen_ai.system.message"})
PROMPT_EVENTS = frozenset(
    {"gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message"}
)
CHOICE = "gen_ai.choice"
DETAILS = "gen_ai.client.inference.operation.details"
WHOLE_TEXT = {
    "gen_ai.content.prompt": "gen_ai.prompt",
    "gen_ai.content.completion": "gen_ai.completion",
}
CONTENT_EVENTS = SYSTEM_EVENTS | PROMPT_EVENTS | {CHOICE, DETAILS, *WHOLE_TEXT}


def event_name(record: Any, attrs: dict[str, Any]) -> str | None:
    name = record.event_name or attrs.get("event.name")
    return name if isinstance(name, str) and name else None


def _piece(part: str, text: str | None, order: list[int], finish: str | None = None) -> list[Any]:
    return [{"part": part, "text": text, "order": order, "finish": finish}] if text else []


def _choice(body: Any, order: list[int]) -> list[dict[str, Any]]:
    if isinstance(body, str):
        return _piece("response", body, order)
    if not isinstance(body, dict):
        return []
    index = body.get("index")
    message = body.get("message")
    text, _ = _messages_text(message, []) if message is not None else (None, None)
    finish = body.get("finish_reason")
    if isinstance(index, int) and not isinstance(index, bool):
        order = [index, *order[1:]]
    return _piece("response", text, order, finish if isinstance(finish, str) else None)


def log_pieces(record: Any, position: int) -> list[dict[str, Any]] | str:
    """The content pieces of a GenAI content event, or a reason key (sidecar.otlp.tally) for a
    record that is not one. `position`: the record's place in its request."""
    attrs = attributes(record.attributes)
    name = event_name(record, attrs)
    if name not in CONTENT_EVENTS:
        return "not_content_event"
    order = [0, int(record.time_unix_nano or record.observed_time_unix_nano), position]
    body = plain(record.body) if record.HasField("body") else None
    if name in SYSTEM_EVENTS or name in PROMPT_EVENTS:
        text, _ = _messages_text(body, []) if body is not None else (None, None)
        return _piece("system" if name in SYSTEM_EVENTS else "prompt", text, order)
    if name == CHOICE:
        return _choice(body, order)
    if name in WHOLE_TEXT:
        value = attrs.get(WHOLE_TEXT[name])
        part = "prompt" if name.endswith("prompt") else "response"
        return _piece(part, value if isinstance(value, str) else None, order)
    pieces: list[dict[str, Any]] = []
    for part, key in (
        ("system", "gen_ai.system_instructions"),
        ("prompt", "gen_ai.input.messages"),
        ("response", "gen_ai.output.messages"),
    ):
        if attrs.get(key) is not None:
            text, finish = _messages_text(attrs[key], [])
            pieces += _piece(part, text, order, finish)
    return pieces


def joined(pieces: list[dict[str, Any]]) -> tuple[str | None, str | None, str | None]:
    """(prompt, response, finish reason) of one span's pieces: the system text before the
    prompt, as a span's own content is read (sidecar.otlp.content)."""
    ordered = sorted(pieces, key=lambda p: p["order"])

    def text(*parts: str) -> str | None:
        texts = [p["text"] for p in ordered if p["part"] in parts]
        return "\n".join(texts) if texts else None

    system, prompt = text("system"), text("prompt")
    if system and prompt:
        prompt = f"{system}\n{prompt}"
    finish = next((p["finish"] for p in ordered if p.get("finish")), None)
    return prompt or system, text("response"), finish
