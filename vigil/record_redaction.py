"""The one redaction step every stored sample goes through, whichever way it came in (the
engine's and the proxy's traffic through storage's writer, `POST /v1/ingest` and OTLP spans
through the sidecar's write path).

- `user` and `session` are stored as keyed pseudonyms (vigil.pseudonym), never as sent; a value
  that already is one (the engine and the OTLP mapping make them) is kept.
- With `VIGIL_REDACT_PII`, `prompt`, `response` and every text value inside the record's
  unknown fields (`metadata` included) go through `vigil.redact.redact_pii`.

Applying it twice changes nothing, so a journal replay or a record that passed an earlier step
is stored the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from vigil.pseudonym import hash_user
from vigil.redact import redact_pii
from vigil.sample_record import SampleRecord

TEXT_FIELDS = ("prompt", "response")
PSEUDONYMOUS_FIELDS = ("user", "session")
_PSEUDONYM = re.compile(r"u-[0-9a-f]{16}")
_RECORD_FIELDS = frozenset(SampleRecord.model_fields)


@dataclass(frozen=True)
class RecordRedaction:
    secret: str  # keys the pseudonyms
    pii: bool  # VIGIL_REDACT_PII: redact texts too

    @classmethod
    def from_settings(cls, settings: Any) -> RecordRedaction:
        return cls(secret=settings.secret_key, pii=settings.redact_pii)

    def record(self, data: dict[str, Any]) -> dict[str, Any]:
        """A redacted copy of a record dict (the sample record's shape)."""
        out = dict(data)
        for name in TEXT_FIELDS:
            if isinstance(out.get(name), str):
                out[name] = self.text(out[name])
        for name, value in data.items():
            if name not in _RECORD_FIELDS and not name.startswith("eval_"):
                out[name] = self._unknown(name, value)
        return out

    def sample(self, record: SampleRecord) -> SampleRecord:
        """Redact a validated record in place; returns it."""
        record.prompt = self.text(record.prompt)
        record.response = self.text(record.response)
        extra = record.model_extra or {}
        for name, value in list(extra.items()):
            if not name.startswith("eval_"):
                extra[name] = self._unknown(name, value)
        return record

    def text(self, value: str | None) -> str | None:
        """One text, redacted when `pii` is on (the OTLP join buffer's pieces before they wait)."""
        return redact_pii(value) if self.pii and value else value

    def _unknown(self, name: str, value: Any) -> Any:
        if name in PSEUDONYMOUS_FIELDS and value is not None:
            return self._pseudonym(value)
        return self._texts_in(value) if self.pii else value

    def _pseudonym(self, value: Any) -> str | None:
        if isinstance(value, str) and _PSEUDONYM.fullmatch(value):
            return value
        plain = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        return hash_user(plain, self.secret)

    def _texts_in(self, value: Any) -> Any:
        if isinstance(value, str):
            return redact_pii(value)
        if isinstance(value, dict):
            return {key: self._texts_in(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._texts_in(item) for item in value]
        return value
