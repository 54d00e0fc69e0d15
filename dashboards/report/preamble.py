"""Shared preambles: the opening text (a system prompt, a template's instructions) that many of
a window's prompts start with. Example prompts are shown without it, so two examples that
differ only after a long shared preamble do not read the same once truncated."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

MIN_PREAMBLE_CHARS = 20  # a shorter shared opening ("Hi, ") is part of the prompt, not a preamble
MIN_SHARE = 0.1  # of the prompts seen: a preamble is shared by at least this many (and 2)
MAX_PROMPTS = 5000  # bounded work per window
ELLIPSIS = "…"


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _word_cut(text: str, length: int) -> int:
    """`length` moved back to just after a whitespace, so a preamble never ends inside a word."""
    while length > 0 and not text[length - 1].isspace():
        length -= 1
    return length


def shared_preambles(
    prompts: Iterable[object], *, min_chars: int = MIN_PREAMBLE_CHARS, min_share: float = MIN_SHARE
) -> list[str]:
    """Openings (ending at a whitespace, at least `min_chars` long) that at least
    max(2, min_share × n) of the prompts start with; the longest such opening of each group."""
    # distinct texts: a prompt sent many times is not a preamble of itself
    texts = sorted({t for t in prompts if isinstance(t, str)})[:MAX_PROMPTS]
    need = max(2, int(min_share * len(texts) + 0.999999))
    if len(texts) < need:
        return []
    lcp = [_common(texts[i], texts[i + 1]) for i in range(len(texts) - 1)]
    found: set[str] = set()
    # a run of `need` neighbours in sorted order shares the minimum of their adjacent prefixes
    span = need - 1
    window: deque[int] = (
        deque()
    )  # indices of lcp, their values increasing: the window's minimum first
    for i, value in enumerate(lcp):
        while window and lcp[window[-1]] >= value:
            window.pop()
        window.append(i)
        if window[0] <= i - span:
            window.popleft()
        if i >= span - 1:
            start = i - span + 1
            length = _word_cut(texts[start], lcp[window[0]])
            if length >= min_chars:
                found.add(texts[start][:length])
    # keep the longest of nested ones: a prompt is cut at the most it shares with enough others
    return sorted(found, key=len, reverse=True)


def strip_preamble(text: str, preambles: Sequence[str]) -> str:
    """The text after the longest preamble it starts with, marked with "…"; the text unchanged
    when none fits, or when nothing would be left."""
    for p in preambles:  # longest first
        if text.startswith(p) and text[len(p) :].strip():
            return ELLIPSIS + text[len(p) :].lstrip()
    return text
