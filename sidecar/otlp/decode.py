"""An OTLP/HTTP traces body -> `ExportTraceServiceRequest`: protobuf or JSON, optionally gzip.

The body was already bounded by the request guard; a gzip body is also bounded once inflated
(`max_bytes`), so a small bomb cannot become gigabytes. OTLP/JSON writes trace and span ids as
hex strings where protobuf's JSON mapping expects base64: they are converted before parsing.
Every refusal is a `BadPayload` with the status to answer (400, 413 or 415) and why.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MAX_JSON_DEPTH = 64  # resource spans > scope spans > spans > attributes > nested values


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
    body: bytes, content_type: str | None, encoding: str | None, max_bytes: int
) -> tuple[ExportTraceServiceRequest, str]:
    """The request and the media type to answer in."""
    kind = media_type(content_type)
    raw = inflate(body, encoding, max_bytes)
    request = ExportTraceServiceRequest()
    if kind == PROTOBUF:
        try:
            request.ParseFromString(raw)
        except (DecodeError, RecursionError, ValueError) as exc:
            raise BadPayload(400, f"not an OTLP ExportTraceServiceRequest ({exc})") from None
        return request, kind
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadPayload(400, f"the body is not JSON ({str(exc)[:120]})") from None
    if not isinstance(document, dict):
        raise BadPayload(400, "an OTLP/JSON body is an object with 'resourceSpans'")
    _ids_to_base64(document)
    try:
        json_format.ParseDict(
            document, request, ignore_unknown_fields=True, max_recursion_depth=MAX_JSON_DEPTH
        )
    except (json_format.ParseError, RecursionError, ValueError, TypeError, AttributeError) as exc:
        raise BadPayload(
            400, f"not an OTLP/JSON ExportTraceServiceRequest ({str(exc)[:200]})"
        ) from None
    return request, kind


_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _ids_to_base64(document: dict[str, Any]) -> None:
    for resource in _list(document.get("resourceSpans", document.get("resource_spans"))):
        for scope in _list(_get(resource, "scopeSpans", "scope_spans")):
            for span in _list(_get(scope, "spans")):
                _convert(span)
                for link in _list(_get(span, "links")):
                    _convert(link)


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


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


__all__ = ["JSON", "PROTOBUF", "BadPayload", "decode"]
