"""OpenAI request bodies (pydantic). Ranges are declared here so `/openapi.json` tells clients
(and schemathesis) what is valid; anything outside is a 400 naming the parameter."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_N = 16  # choices per request; bounds the work one request can put on the engine
# caps on what one request may carry: each bounds parsing, templating or per-token work
MAX_MESSAGES = 512
MAX_CONTENT_CHARS = 512 * 1024  # one message's text (the byte limit bounds the total)
MAX_PARTS = 256  # content parts in one message
MAX_TOOLS = 64
MAX_TOOL_CALLS = 64
MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 256  # checked against the tail of the text on every generated token
MAX_NAME_CHARS = 256

Text = Annotated[str, Field(max_length=MAX_CONTENT_CHARS)]
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
StopString = Annotated[str, Field(max_length=MAX_STOP_CHARS)]


class _Body(BaseModel):
    # unknown fields are ignored (clients send vendor extras); inf/nan are refused
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class StreamOptions(_Body):
    include_usage: bool = False


class TextPart(_Body):
    type: Literal["text"]
    text: Text


class FunctionDef(_Body):
    name: Annotated[str, Field(min_length=1, max_length=64)]
    description: Text | None = None
    parameters: dict | None = None


class Tool(_Body):
    type: Literal["function"] = "function"
    function: FunctionDef


class ToolCallFunction(_Body):
    name: Name
    arguments: Text = ""


class ToolCall(_Body):
    id: Name = ""
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | Annotated[list[TextPart], Field(max_length=MAX_PARTS)] | None = None
    name: Name | None = None
    tool_calls: Annotated[list[ToolCall], Field(max_length=MAX_TOOL_CALLS)] | None = None
    tool_call_id: Name | None = None

    @model_validator(mode="after")
    def _content_present(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError(f"a {self.role} message needs content")
        return self

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class SamplingFields(_Body):
    """Sampler fields shared by both endpoints."""

    model: Annotated[str, Field(min_length=1)]
    n: Annotated[int, Field(ge=1, le=MAX_N)] = 1
    max_tokens: Annotated[int | None, Field(ge=1)] = None
    temperature: Annotated[float | None, Field(ge=0.0, le=2.0)] = None
    top_p: Annotated[float | None, Field(gt=0.0, le=1.0)] = None
    # bounded: the engine core's message codec carries 64-bit ints at most (larger: a 500, not a
    # 400)
    top_k: Annotated[int | None, Field(ge=-1, le=2**31 - 1)] = None
    min_p: Annotated[float | None, Field(ge=0.0, le=1.0)] = None
    frequency_penalty: Annotated[float | None, Field(ge=-2.0, le=2.0)] = None
    presence_penalty: Annotated[float | None, Field(ge=-2.0, le=2.0)] = None
    seed: Annotated[int | None, Field(ge=INT64_MIN, le=INT64_MAX)] = None
    stop: StopString | Annotated[list[StopString], Field(max_length=MAX_STOP_STRINGS)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False  # vLLM's extension: keep generating past the end-of-sequence token
    # vLLM's extension: non-streamed choices also carry `prompt_token_ids` and `token_ids`
    return_token_ids: bool = False
    user: Annotated[str | None, Field(max_length=256)] = None
    metadata: Annotated[dict[str, str] | None, Field(max_length=16)] = None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class ChatCompletionRequest(SamplingFields):
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    max_completion_tokens: Annotated[int | None, Field(ge=1)] = None
    logprobs: bool = False
    top_logprobs: Annotated[int | None, Field(ge=0, le=20)] = None
    tools: Annotated[list[Tool], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: str | dict | None = None

    @model_validator(mode="after")
    def _top_logprobs_needs_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs to be true")
        return self

    def token_limit(self) -> int | None:
        return (
            self.max_completion_tokens
            if self.max_completion_tokens is not None
            else self.max_tokens
        )


TokenIds = Annotated[list[Annotated[int, Field(ge=0, le=2**31 - 1)]], Field(min_length=1)]


class CompletionRequest(SamplingFields):
    # a string, a list of strings, a list of token ids, or a list of token-id lists
    prompt: (
        Text
        | Annotated[list[Text], Field(min_length=1, max_length=16)]
        | TokenIds
        | Annotated[list[TokenIds], Field(min_length=1, max_length=16)]
    )
    logprobs: Annotated[int | None, Field(ge=0, le=5)] = None
    echo: bool = False
    suffix: Text | None = None

    @model_validator(mode="after")
    def _unsupported(self) -> CompletionRequest:
        if self.echo and self.stream:
            raise ValueError("echo is not supported with stream")
        if self.suffix:
            raise ValueError("suffix is not supported")
        return self

    def token_limit(self) -> int | None:
        return self.max_tokens

    def prompts(self) -> list[str | list[int]]:
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if p and isinstance(p[0], int):
            return [list(p)]
        return list(p)  # type: ignore[arg-type]
