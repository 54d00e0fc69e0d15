"""One proxied request and its answer, read on the traffic logger's thread (never on the
request path): the prompt from the request body, and per choice the text, finish reason,
usage, TTFT, time per output token and mean log-probability (when the client asked for
logprobs) from the upstream's JSON or SSE bytes as they were relayed.

Stream timings come from when each relayed piece arrived: an event counts as arriving with the
piece that completed it. Without `usage` in the answer (a stream without
`stream_options.include_usage`), the completion tokens are the count of events that carried
text, one token per event as vLLM and SGLang stream. Entropy is not known from an upstream
(top-k log-probabilities do not give it).

The answer's bytes come from an upstream Vigil does not control: at most `MAX_KEPT_BYTES` of
one answer are kept, events are found in one linear pass however finely the bytes were split,
and JSON nested past the parser's stack is skipped like any other bytes that are not JSON.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from starlette.requests import Request
from starlette.types import Scope

from serving.server.base.auth import request_segment
from serving.traffic.logger import Observation
from serving.traffic.record import RequestStats
from vigil.config import Settings

# the most of one answer kept for reading: far past any context length in text, so only a
# runaway or hostile upstream reaches it; such an answer is relayed whole but not sampled
MAX_KEPT_BYTES = 8 * 1024 * 1024
_EVENT_END = re.compile(rb"\r?\n\r?\n")  # a blank line ends an SSE event (CRLF or LF)


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    first: float | None = None  # arrival of the first event with text (perf_counter seconds)
    last: float | None = None
    events: int = 0
    logprobs: list[float] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)


@dataclass
class Exchange:
    scope: Scope  # the client's request scope: headers, address and key (for the segment)
    body: bytes  # the request body as the client sent it
    started: float  # perf_counter seconds when the request reached the proxy
    streamed: bool
    pieces: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # perf_counter seconds of each piece
    end_time: float = 0.0  # epoch seconds
    kept: int = 0  # bytes of the answer kept so far
    overflow: bool = False  # the answer passed MAX_KEPT_BYTES: relayed, never read

    def keep(self, piece: bytes, at: float) -> None:
        """Keep a relayed piece for reading later, up to MAX_KEPT_BYTES of the answer; past it
        the pieces are let go (the answer is relayed whole but not sampled)."""
        if self.overflow:
            return
        self.kept += len(piece)
        if self.kept > MAX_KEPT_BYTES:
            self.overflow = True
            self.pieces, self.times = [], []
            return
        self.pieces.append(piece)
        self.times.append(at)

    def observe(self, settings: Settings) -> Observation | None:
        if self.overflow:
            return None
        try:
            request = json.loads(self.body)
        except (ValueError, RecursionError):  # RecursionError: JSON nested past the C stack
            return None
        if not isinstance(request, dict):
            return None
        metadata = request.get("metadata") if isinstance(request.get("metadata"), dict) else None
        user = request.get("user") if isinstance(request.get("user"), str) else None
        segment = request_segment(Request(self.scope), settings, user, metadata)
        return Observation(segment=segment, read=lambda: self._read(request))

    def _read(
        self, request: dict[str, Any]
    ) -> tuple[list[tuple[RequestStats, dict[str, Any]]], str | None]:
        """Per choice its statistics and extras, and the model the answer names."""
        choices: dict[int, _Choice] = {}
        usage: dict[str, Any] = {}
        model: str | None = None
        answer_id: str | None = None
        for payload, at in self._events() if self.streamed else self._whole():
            model = model or _str(payload.get("model"))
            answer_id = answer_id or _str(payload.get("id"))
            if isinstance(payload.get("usage"), dict):
                usage = payload["usage"]
            for raw in _list(payload.get("choices")):
                if isinstance(raw, dict):
                    index = raw.get("index")
                    index = index if _is_int(index) and 0 <= index < 1024 else 0
                    _fold(choices.setdefault(index, _Choice()), raw, at)
        prompt = _prompt_text(request)
        end = self.times[-1] if self.times else self.started
        out = []
        for index, choice in sorted(choices.items()):
            completion = usage.get("completion_tokens") if len(choices) == 1 else None
            n_out = completion if _is_int(completion) else choice.events
            tpot = None
            if n_out > 1 and choice.first is not None and choice.last is not None:
                tpot = (choice.last - choice.first) * 1000.0 / (n_out - 1)
            stats = RequestStats(
                prompt=prompt,
                response="".join(choice.text),
                prompt_tokens=usage.get("prompt_tokens")
                if _is_int(usage.get("prompt_tokens"))
                else None,
                completion_tokens=n_out,
                finish_reason=choice.finish_reason,
                queue_ms=None,
                ttft_ms=(choice.first - self.started) * 1000.0
                if choice.first is not None
                else None,
                tpot_ms=tpot,
                latency_ms=(end - self.started) * 1000.0,
                mean_logprob=sum(choice.logprobs) / len(choice.logprobs)
                if choice.logprobs
                else None,
                mean_entropy=None,
                end_time=self.end_time,
                tools=choice.tools,
            )
            out.append((stats, {"request_id": answer_id, "choice_index": index, "source": "proxy"}))
        return out, model

    def _whole(self) -> Iterator[tuple[dict[str, Any], float | None]]:
        payload = _json(b"".join(self.pieces))
        if isinstance(payload, dict):
            yield payload, None

    def _events(self) -> Iterator[tuple[dict[str, Any], float | None]]:
        """Each complete SSE event's JSON payloads, with the arrival of the piece that completed
        the event (its blank line). One pass over the joined answer: linear in its size however
        finely the upstream split it; an unfinished last event is not read."""
        raw = b"".join(self.pieces)
        ends = list(itertools.accumulate(len(p) for p in self.pieces))
        start = 0
        for separator in _EVENT_END.finditer(raw):
            event, start = raw[start : separator.start()], separator.end()
            at = self.times[bisect.bisect_left(ends, separator.end())]
            for line in event.replace(b"\r\n", b"\n").split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    continue
                payload = _json(data)
                if isinstance(payload, dict):
                    yield payload, at


def _json(data: bytes) -> Any:
    """The parsed JSON, or None for bytes that are not JSON or nest too deep to parse."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _fold(choice: _Choice, raw: dict[str, Any], at: float | None) -> None:
    delta = raw.get("delta") if isinstance(raw.get("delta"), dict) else raw.get("message")
    piece = None
    if isinstance(delta, dict):
        piece = delta.get("content")
        for call in _list(delta.get("tool_calls")):
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str) and name:
                choice.tools.append(name)
    elif isinstance(raw.get("text"), str):
        piece = raw["text"]
    if isinstance(piece, str) and piece:
        choice.text.append(piece)
        choice.events += 1
        if at is not None:
            choice.first = at if choice.first is None else choice.first
            choice.last = at
    if isinstance(raw.get("finish_reason"), str):
        choice.finish_reason = raw["finish_reason"]
    logprobs = raw.get("logprobs")
    if isinstance(logprobs, dict):
        if isinstance(logprobs.get("content"), list):  # chat
            values = [t.get("logprob") for t in logprobs["content"] if isinstance(t, dict)]
        else:  # completions
            values = _list(logprobs.get("token_logprobs"))
        choice.logprobs += [
            float(v)
            for v in values
            if isinstance(v, int | float) and not isinstance(v, bool) and -1e4 <= v <= 0
        ]


def _prompt_text(request: dict[str, Any]) -> str:
    messages = request.get("messages")
    if isinstance(messages, list):
        pieces = []
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                pieces.append(content)
            elif isinstance(content, list):
                pieces += [
                    p["text"]
                    for p in content
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                ]
        return "\n".join(pieces)
    prompt = request.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        return prompt[0]
    return prompt if isinstance(prompt, str) else ""
