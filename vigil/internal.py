"""Marking requests as internal: traffic Vigil itself sends (the LLM judge, canaries, demos) is
never logged as a sample, so it cannot skew the drift statistics it is measuring.

A request carrying `X-Vigil-Internal: <reason>` is served as usual and skipped by the engine's
traffic logger. Any caller holding an API key may send the header today; binding it to
designated keys is left to the key management (until then a client could hide its own traffic
from monitoring with it).
"""

from __future__ import annotations

INTERNAL_HEADER = "X-Vigil-Internal"
MAX_REASON_CHARS = 64  # the reason is only counted and logged, never stored
