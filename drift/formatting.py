"""Human text for numbers and results: one place that never fails on None, NaN or inf.

Every summary line (alert summaries, baseline validation reasons, the report) goes through
`fmt_num`, so a test that leaves a field empty (cluster growth has no threshold, an
insufficient result has no statistic) still prints instead of raising.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "n/a"
_PERCENT_CAP = 1e6  # beyond this a percentage is noise digits: print it in g-format


def clean_text(value: Any) -> str:
    """`str(value)` with lone surrogates (from JSON "\\ud800" escapes) replaced by U+FFFD, so
    the text can be encoded as UTF-8 (files, terminals, databases)."""
    text = value if isinstance(value, str) else str(value)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def fmt_num(value: Any, spec: str = ".3g") -> str:
    """`format(value, spec)` for numbers; "n/a" for None/NaN, "inf"/"-inf" for infinities,
    the text itself for anything that is not a number."""
    if value is None:
        return MISSING
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return clean_text(value)
    if math.isnan(x):
        return MISSING
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if spec.endswith("%") and abs(x) >= _PERCENT_CAP:
        return f"{x * 100:.3g}%"
    try:
        return format(x, spec)
    except ValueError:  # a spec meant for another type
        return format(x, ".3g")
