"""Marking requests as internal: traffic Vigil itself sends (the LLM judge, canaries, demos) is
never logged as a sample, so it cannot skew the drift statistics it is measuring.

A request carrying `X-Vigil-Internal: <reason>` is served as usual and skipped by the engine's
traffic logger. Only operator and admin keys (`VIGIL_OPERATOR_KEYS`, `VIGIL_ADMIN_KEYS`) may
mark traffic internal: the mark is dropped for global and tenant-bound keys, so no client can
hide its own traffic from monitoring.
"""

from __future__ import annotations

INTERNAL_HEADER = "X-Vigil-Internal"
MAX_REASON_CHARS = 64  # the reason is only counted and logged, never stored
