"""Each sample's draw: a fixed pseudo-random 63-bit key derived from its id.

A capped drift window keeps, per segment, the rows with the smallest draws
(`storage.repositories.window_cap`). Because the key belongs to the sample and not to the window,
the rows a window will read are known while it is still filling (a row among the smallest
draws of the full window is among the smallest of any part of it that holds the row), and a
longer range kept at a lower rate (a baseline of many hours) keeps rows that its hours' windows
keep too. The hash is keyed so the draw is not a plain digest of the id, and the order it gives
is independent of time, tenant and content.
"""

from __future__ import annotations

from hashlib import blake2b

_KEY = b"vigil-window-draw"


def sample_draw(sample_id: str) -> int:
    """A uniform integer in [0, 2**63) fixed by `sample_id` (fits a signed 64-bit column)."""
    digest = blake2b(sample_id.encode("utf-8", "surrogatepass"), digest_size=8, key=_KEY).digest()
    return int.from_bytes(digest, "big") >> 1
