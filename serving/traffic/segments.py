"""Segment identity of a request: who sent it and under which prompt version.

Sources, strongest first: the `x-vigil-*` headers (set by a gateway the operator controls),
then the request body's `metadata` object, then (tenant only) the OpenAI `user` field. The
`X-Vigil-Internal` header (vigil.internal) marks Vigil's own requests, which are not logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vigil.internal import INTERNAL_HEADER, MAX_REASON_CHARS
from vigil.sample_record.names import safe_name

MAX_LEN = 128  # the samples table's String(128) columns

HEADER_TENANT = "x-vigil-tenant"
HEADER_SEGMENT = "x-vigil-segment"
HEADER_PROMPT_VERSION = "x-vigil-prompt-version"


@dataclass(frozen=True)
class SegmentInfo:
    tenant: str | None = None
    segment: str | None = None
    prompt_version: str | None = None
    user: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)  # the body's metadata, as sent
    internal: str | None = None  # the X-Vigil-Internal reason: never logged as traffic

    def key(self) -> tuple[str | None, str | None]:
        """The stratum the per-segment quota is kept for."""
        return (self.tenant, self.segment)


def _storable(value: object) -> str:
    # NUL and lone surrogates cannot be stored in PostgreSQL text: replace them
    return str(value).replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _clean(value: object) -> str | None:
    """A label the record schema accepts: characters outside its safe set (vigil.sample_record
    NAME_CHARS) become `_`, since a served request cannot be refused for its label."""
    if value is None:
        return None
    return safe_name(str(value).strip()[:MAX_LEN]) or None


def segment_from_request(
    headers: Mapping[str, str],
    user: str | None = None,
    metadata: Mapping[str, object] | None = None,
) -> SegmentInfo:
    """Resolve tenant/segment/prompt_version; header > metadata > user. Values are cut to 128
    chars; labels and metadata keys keep only the record's safe name characters."""
    meta = {safe_name(str(k)) or "_": _storable(v) for k, v in (metadata or {}).items()}
    lowered = {k.lower(): v for k, v in headers.items()}

    def pick(header: str, meta_key: str) -> str | None:
        return _clean(lowered.get(header)) or _clean(meta.get(meta_key))

    return SegmentInfo(
        tenant=pick(HEADER_TENANT, "tenant") or _clean(user),
        segment=pick(HEADER_SEGMENT, "segment"),
        prompt_version=pick(HEADER_PROMPT_VERSION, "prompt_version"),
        user=_clean(user),
        metadata=meta,
        # serving.server.base.auth drops the mark for tenant-bound keys
        internal=_internal_reason(lowered.get(INTERNAL_HEADER.lower())),
    )


def _internal_reason(value: str | None) -> str | None:
    """The header's reason; a header present but empty still marks the request internal."""
    if value is None:
        return None
    return _storable(value).strip()[:MAX_REASON_CHARS] or "unspecified"
