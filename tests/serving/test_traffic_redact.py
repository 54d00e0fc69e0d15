"""PII redaction: planted e-mails, phones and Luhn-valid card numbers go; ordinary numbers stay."""

from __future__ import annotations

import pytest

from serving.traffic.redact import luhn_valid, redact_pii


@pytest.mark.parametrize(
    "text,expected",
    [
        ("write to john.doe+news@example.co.uk today", "write to [EMAIL] today"),
        ("ALICE@Mail.Example.ORG.", "[EMAIL]."),
        ("call +1 (555) 123-4567 now", "call [PHONE] now"),
        ("or 555-123-4567, or 555.123.4567.", "or [PHONE], or [PHONE]."),
        ("london +44 20 7946 0958", "london [PHONE]"),
        ("berlin 030 12345678", "berlin [PHONE]"),
        ("bare 5551234567 digits", "bare [PHONE] digits"),
        ("intl +4915112345678", "intl [PHONE]"),
        ("visa 4111 1111 1111 1111 ok", "visa [CARD] ok"),
        ("dashed 4111-1111-1111-1111.", "dashed [CARD]."),
        ("amex 3782-822463-10005", "amex [CARD]"),
    ],
)
def test_planted_pii_is_replaced(text, expected):
    assert redact_pii(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "In 2026 I bought 12 apples for $1,234.56 (pi is 3.14159, version 1.2.3).",
        "Meet on 2026-11-29 at 10:30 or 29.11.2026.",
        "order id 12345678 and ip 192.168.1.100",
        "The capital of France is Paris.",
        "",
    ],
)
def test_ordinary_text_is_untouched(text):
    assert redact_pii(text) == text


def test_card_needs_a_valid_luhn_checksum():
    assert luhn_valid("4111111111111111") and luhn_valid("378282246310005")
    assert not luhn_valid("4111111111111112")
    assert "[CARD]" not in redact_pii("4111 1111 1111 1112")


def test_mixed_paragraph():
    text = "Hi, I'm Bob (bob@corp.io, +1 415-555-0199). Card: 5555 5555 5555 4444. Thanks!"
    out = redact_pii(text)
    assert out == "Hi, I'm Bob ([EMAIL], [PHONE]). Card: [CARD]. Thanks!"
    for secret in ("bob@corp.io", "415", "5555"):
        assert secret not in out
