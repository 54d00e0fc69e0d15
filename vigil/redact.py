"""PII redaction applied to prompts and responses before they are stored.

Card numbers first (13-19 digits, spaces/dashes allowed, Luhn-valid), then e-mail addresses,
then phone numbers (7-15 digits in the usual groupings, optional +country code and (area),
or a bare run of 10-15 digits); dates are left alone.
Each match becomes a typed placeholder so the text keeps its shape for drift statistics.
"""

from __future__ import annotations

import re

EMAIL_TOKEN = "[EMAIL]"
PHONE_TOKEN = "[PHONE]"
CARD_TOKEN = "[CARD]"
TRUNCATED_TOKEN = "[TRUNCATED]"
MAX_REDACT_CHARS = 64 * 1024  # bounds the scan; drift features need far less of a text

# the look-behind holds every character of the local part, so a match can only start where a
# run of them starts: one attempt per run keeps the scan linear ("%" * 80_000 was quadratic)
_EMAIL = re.compile(
    r"(?<![\w.%+-])[\w.%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
_CARD = re.compile(r"(?<![\d+-])\d(?:[ -]?\d){12,18}(?![\d])")
_PHONE = re.compile(
    r"(?<![\w+])"
    r"(?:\+\d{1,3}[\s.-]?)?"  # country code
    r"(?:\(\d{1,4}\)[\s.-]?|\d{1,4}[\s.-])?"  # area code, bracketed or separated
    r"\d{2,4}[\s.-]?\d{2,4}(?:[\s.-]?\d{2,4})?"
    r"(?!\w)"
)
_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return CARD_TOKEN if 13 <= len(digits) <= 19 and luhn_valid(digits) else match.group()


def _phone(match: re.Match[str]) -> str:
    text = match.group()
    if _DATE.fullmatch(text):
        return text
    digits = re.sub(r"\D", "", text)
    # a short bare run of digits is a count or an id; a phone is formatted or 10+ digits long
    formatted = text.startswith("+") or "(" in text or re.search(r"\d[\s.-]\d", text) is not None
    if (formatted and 7 <= len(digits) <= 15) or 10 <= len(digits) <= 15:
        return PHONE_TOKEN
    return text


def redact_pii(text: str) -> str:
    """Replace card numbers, e-mail addresses and phone numbers in `text` by placeholders.
    Text past MAX_REDACT_CHARS is cut off first: what is stored is always fully redacted."""
    if not text:
        return text
    if len(text) > MAX_REDACT_CHARS:
        text = text[:MAX_REDACT_CHARS] + TRUNCATED_TOKEN
    text = _CARD.sub(_card, text)
    text = _EMAIL.sub(EMAIL_TOKEN, text)
    return _PHONE.sub(_phone, text)
