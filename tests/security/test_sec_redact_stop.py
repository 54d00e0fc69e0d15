"""Linear-time text handling on the request path: PII redaction on adversarial input and the
stop-string hold-back check, each against a brute-force oracle."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serving.stop import StopStringMatcher, held_suffix_len
from serving.traffic.redact import EMAIL_TOKEN, MAX_REDACT_CHARS, TRUNCATED_TOKEN, redact_pii

BOUNDED = settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize(
    "text",
    [
        "%" * 80_000,  # was 8 s holding the GIL
        "a" * 40_000 + "@" + "b" * 20_000,
        "a." * 30_000 + "@x",
        "a@" * 30_000,
        "x@" + "a-" * 30_000,
        "1 " * 30_000,
        "+1-" * 20_000,
    ],
)
def test_redaction_is_fast_on_adversarial_input(text):
    start = time.perf_counter()
    redact_pii(text)
    assert time.perf_counter() - start < 0.5


def test_redaction_caps_the_text_it_scans():
    out = redact_pii("word " * (MAX_REDACT_CHARS // 4))
    assert out.endswith(TRUNCATED_TOKEN) and len(out) == MAX_REDACT_CHARS + len(TRUNCATED_TOKEN)


@BOUNDED
@given(
    local=st.from_regex(r"[a-z0-9._%+-]{1,12}", fullmatch=True).filter(lambda s: s[0].isalnum()),
    domain=st.from_regex(r"[a-z0-9]{1,8}\.(com|org|io)", fullmatch=True),
    noise=st.text(alphabet="%.+- ab", max_size=30),
)
def test_emails_are_still_redacted(local, domain, noise):
    text = f"{noise} write to {local}@{domain} today"
    out = redact_pii(text)
    assert f"{local}@{domain}" not in out and EMAIL_TOKEN in out


def _held_oracle(text: str, stops: list[str]) -> int:
    return max((n for s in stops for n in range(1, len(s)) if text.endswith(s[:n])), default=0)


@BOUNDED
@given(
    text=st.text(alphabet="ab", max_size=40),
    stops=st.lists(st.text(alphabet="ab", min_size=1, max_size=8), min_size=1, max_size=4),
)
def test_held_suffix_matches_brute_force(text, stops):
    assert held_suffix_len(text, stops) == _held_oracle(text, stops)


@BOUNDED
@given(
    pieces=st.lists(st.text(alphabet="abc", max_size=4), max_size=30),
    stops=st.lists(st.text(alphabet="abc", min_size=1, max_size=6), min_size=1, max_size=3),
)
def test_streamed_output_matches_a_whole_text_oracle(pieces, stops):
    """Streaming through the matcher gives the text cut before the first-completing stop."""
    matcher = StopStringMatcher(stops)
    shown = "".join(matcher.feed(p)[0] for p in pieces) + matcher.flush()
    full = "".join(pieces)
    ends = sorted(
        (start + len(s), start)
        for s in stops
        for start in [m.start() for m in re.finditer(f"(?={re.escape(s)})", full)]
    )
    expected = full[: ends[0][1]] if ends else full
    assert shown == expected
    # never shown early: every emitted prefix is a prefix of the final text
    assert expected.startswith(shown)


def test_hold_back_cost_is_linear_per_token():
    """Was O(T^2) per token: four long near-miss stop strings made each token re-slice every
    prefix of the text (20 s for 4,000 tokens on the old code)."""
    stops = [c + "a" * 50_000 for c in "bcde"]
    matcher = StopStringMatcher(stops)
    start = time.perf_counter()
    for _ in range(4_000):
        matcher.feed("a")
    assert time.perf_counter() - start < 2.0
    assert matcher.text == "a" * 4_000  # nothing held: no suffix of "aaa…" starts a stop
