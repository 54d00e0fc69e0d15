"""The engine's PII redaction is the shared leaf `vigil.redact` (the sidecar's OTLP receiver
redacts span content with the same rules)."""

from vigil.redact import (
    CARD_TOKEN,
    EMAIL_TOKEN,
    MAX_REDACT_CHARS,
    PHONE_TOKEN,
    TRUNCATED_TOKEN,
    luhn_valid,
    redact_pii,
)

__all__ = [
    "CARD_TOKEN",
    "EMAIL_TOKEN",
    "MAX_REDACT_CHARS",
    "PHONE_TOKEN",
    "TRUNCATED_TOKEN",
    "luhn_valid",
    "redact_pii",
]
