"""OpenInference attribute shapes and GenAI content events as the mapping reads them: messages
with multi-part contents and tool calls, `input.value` / `output.value` by mime type, and the
order in which one span's content events are joined."""

from __future__ import annotations

import json

from otlp_logs import event, logs_request

from sidecar.otlp.content import span_content
from sidecar.otlp.log_content import joined, log_pieces
from sidecar.otlp.openinference import genai_attributes, span_kind


def content_of(attrs: dict):
    return span_content(genai_attributes(attrs), [])


def test_messages_with_parts_and_tool_calls():
    attrs = {
        "openinference.span.kind": "llm",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.text": "Part one.",
        "llm.input_messages.1.message.contents.1.message_content.text": "Part two.",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        "llm.token_count.prompt": 12,
        "llm.invocation_parameters": json.dumps({"model": "m-1", "temperature": 0}),
    }
    mapped = genai_attributes(attrs)
    assert span_kind(attrs) == "LLM" and mapped["gen_ai.response.model"] == "m-1"
    assert mapped["gen_ai.usage.input_tokens"] == 12
    content = content_of(attrs)
    assert content.prompt == "Be brief.\nPart one.\nPart two." and content.tools == ["search"]


def test_values_by_mime_type():
    as_json = {
        "openinference.span.kind": "LLM",
        "input.value": json.dumps({"messages": [{"role": "user", "content": "Hi?"}]}),
        "input.mime_type": "application/json",
        "output.value": json.dumps(
            {"choices": [{"message": {"content": "Hello."}, "finish_reason": "length"}]}
        ),
        "output.mime_type": "application/json",
    }
    content = content_of(as_json)
    assert (content.prompt, content.response) == ("Hi?", "Hello.")
    assert genai_attributes(as_json)["gen_ai.response.finish_reasons"] == ["length"]
    as_text = {"openinference.span.kind": "LLM", "input.value": "{not json", "output.value": "ok"}
    content = content_of(as_text)
    assert (content.prompt, content.response) == ("{not json", "ok")


def test_a_spans_events_join_in_order_whatever_order_they_came_in():
    events = [
        event(1, "gen_ai.choice", {"index": 1, "message": {"content": "second"}}),
        event(1, "gen_ai.choice", {"index": 0, "message": {"content": "first"},
                                   "finish_reason": "stop"}),
        event(1, "gen_ai.user.message", {"content": "question"}),
        event(1, "gen_ai.system.message", "Be brief."),
    ]  # fmt: skip
    request = logs_request(events)
    records = request.resource_logs[0].scope_logs[0].log_records
    for record in records:  # one instant: the choice index and the place decide
        record.time_unix_nano = 5
    pieces = [p for n, r in enumerate(records) for p in log_pieces(r, n)]
    assert joined(pieces) == ("Be brief.\nquestion", "first\nsecond", "stop")
