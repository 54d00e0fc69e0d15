"""Retry delays for the webhook outbox: exponential backoff with jitter, capped.

The delay after the n-th failed attempt lies in [d/2, d] with d = min(cap, base * 2**(n-1))
("equal jitter"): the lower half keeps successive delays growing until the cap (a receiver
that is down gets fewer and fewer knocks), the random half spreads out the many deliveries
that failed together in one outage so they do not all come back in the same second.
"""

from __future__ import annotations

import random

MAX_EXPONENT = 60  # 2**60 * any base is far past any cap; avoids float overflow on huge counts


def backoff_delay(attempts: int, *, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Seconds to wait after `attempts` (>= 1) failed attempts."""
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    ceiling = min(cap_s, base_s * 2 ** min(attempts - 1, MAX_EXPONENT))
    return ceiling / 2 + rng.random() * ceiling / 2


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header in seconds (the HTTP-date form is ignored: clocks differ)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
