"""An OTLP/HTTP body -> `ExportTraceServiceRequest` or `ExportLogsServiceRequest`: protobuf or
JSON, optionally gzip.

The body was already bounded by the request guard; a gzip body is also bounded once inflated
(`max_bytes`), so a small bomb cannot become gigabytes. OTLP/JSON writes trace and span ids as
hex strings where protobuf's JSON mapping expects base64: they are converted before parsing.
Every refusal is a `BadPayload` with the status to answer (400, 413 or 415) and why.

The spans (or log records) are counted before any is mapped: past `max_items` the request is a
413 at once. In OTLP/JSON they are counted while the ids are rewritten, before protobuf's
(slow, pure Python) JSON parser runs; in protobuf right after the C parser.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MAX_JSON_DEPTH = 64  # resource spans > scope spans > spans > attributes > nested values


@dataclass(frozen=True)
class Signal:
    """Where one OTLP signal keeps its items: (resource list, scope list, item list) in protobuf
    and in OTLP/JSON's camelCase."""

    name: str  # "spans" or "log records"
    message: type
    levels: tuple[str, str, str]
    json_levels: tuple[str, str, str]


TRACES = Signal(
    "spans",
    ExportTraceServiceRequest,
    ("resource_spans", "scope_spans", "spans"),
    ("resourceSpans", "scopeSpans", "spans"),
)
LOGS = Signal(
    "log records",
    ExportLogsServiceRequest,
    ("resource_logs", "scope_logs", "log_records"),
    ("resourceLogs", "scopeLogs", "logRecords"),
)


class BadPayload(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def media_type(content_type: str | None) -> str:
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if kind == JSON:
        return JSON
    raise BadPayload(
        415,
        f"unsupported Content-Type {kind or '(none)'!r}: send OTLP/HTTP as {PROTOBUF} or {JSON}",
    )


def inflate(body: bytes, encoding: str | None, max_bytes: int) -> bytes:
    coding = (encoding or "identity").strip().lower()
    if coding in ("", "identity"):
        return body
    if coding != "gzip":
        raise BadPayload(415, f"unsupported Content-Encoding {coding!r}: use gzip or none")
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise BadPayload(400, f"the gzip body is corrupt ({exc})") from None
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise BadPayload(
            413,
            f"the body inflates past {max_bytes} bytes (VIGIL_INGEST_MAX_BYTES): "
            "send smaller batches",
        )
    if not inflater.eof:
        raise BadPayload(400, "the gzip body is truncated")
    return out


def decode(
    body: bytes,
    content_type: str | None,
    encoding: str | None,
    max_bytes: int,
    signal: Signal = TRACES,
    max_items: int | None = None,
    max_generation: int | None = None,
) -> tuple[Any, str]:
    """The request and the media type to answer in. `max_generation`: in OTLP/JSON, how many
    items with GenAI or OpenInference attributes may come (counted before parsing)."""
    kind = media_type(content_type)
    raw = inflate(body, encoding, max_bytes)
    request = signal.message()
    what = signal.message.__name__
    if kind == PROTOBUF:
        try:
            request.ParseFromString(raw)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise BadPayload(400, f"not an OTLP {what} ({exc})") from None
        _check_count(_count(request, signal), signal, max_items)
        return request, kind
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadPayload(400, f"the body is not JSON ({str(exc)[:120]})") from None
    if not isinstance(document, dict):
        raise BadPayload(400, f"an OTLP/JSON body is an object with {signal.json_levels[0]!r}")
    count, generation = _ids_to_base64(document, signal)
    _check_count(count, signal, max_items)
    if max_generation is not None and generation > max_generation:
        raise BadPayload(
            413,
            f"{generation} GenAI spans in one request; the limit is {max_generation} "
            "(VIGIL_INGEST_MAX_SAMPLES): export smaller batches",
        )
    try:
        json_format.ParseDict(
            document, request, ignore_unknown_fields=True, max_recursion_depth=MAX_JSON_DEPTH
        )
    except (json_format.ParseError, RecursionError, ValueError, TypeError, AttributeError) as exc:
        raise BadPayload(400, f"not an OTLP/JSON {what} ({str(exc)[:200]})") from None
    return request, kind


def _count(request: Any, signal: Signal) -> int:
    top, middle, items = signal.levels
    return sum(
        len(getattr(scope, items))
        for resource in getattr(request, top)
        for scope in getattr(resource, middle)
    )


def _check_count(count: int, signal: Signal, max_items: int | None) -> None:
    if max_items is not None and count > max_items:
        raise BadPayload(
            413,
            f"{count} {signal.name} in one request; the limit is {max_items} "
            "(VIGIL_OTLP_MAX_SPANS): export smaller batches",
        )


_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _is_generation(item: Any) -> bool:
    return any(
        isinstance(kv, dict)
        and isinstance(kv.get("key"), str)
        and (kv["key"].startswith("gen_ai.") or kv["key"] == "openinference.span.kind")
        for kv in _list(_get(item, "attributes"))
    )


def _ids_to_base64(document: dict[str, Any], signal: Signal) -> tuple[int, int]:
    """Rewrite hex ids as base64 in place; the number of items, and of GenAI items."""
    (top, middle, items), (jtop, jmiddle, jitems) = signal.levels, signal.json_levels
    count = generation = 0
    for resource in _list(_get(document, jtop, top)):
        for scope in _list(_get(resource, jmiddle, middle)):
            for item in _list(_get(scope, jitems, items)):
                count += 1
                generation += _is_generation(item)
                _convert(item)
                for link in _list(_get(item, "links")):
                    _convert(link)
    return count, generation


def _convert(item: Any) -> None:
    if not isinstance(item, dict):
        return
    for key in _ID_KEYS:
        value = item.get(key)
        if isinstance(value, str) and value:
            try:
                item[key] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError:
                raise BadPayload(
                    400, f"{key} {value[:40]!r} is not hex (OTLP/JSON writes ids as hex)"
                ) from None


def _get(item: Any, *keys: str) -> Any:
    if not isinstance(item, dict):
        return None
    for key in keys:
        if key in item:
            return item[key]
    return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


__all__ = ["JSON", "LOGS", "PROTOBUF", "TRACES", "BadPayload", "Signal", "decode"]
