"""Stop strings over streamed text.

`StopStringMatcher.feed(delta)` takes each newly detokenized piece and returns what may be shown
now. A suffix that could still grow into a stop string is held back, so a stream never leaks
part of a stop string ("Obs" of "Observation:") and then has to take it back. When a stop
string completes, the text is cut there (the stop string excluded unless asked for) and nothing
after it is ever emitted.

When several stop strings occur, the one that completes first in the text wins (the one a
character-by-character stream would have hit first; at an equal end, the one starting earlier).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class StopMatch:
    stop: str  # the stop string that matched
    start: int  # its index in the text
    end: int  # index just past it


def find_stop(text: str, stops: Sequence[str], search_from: int = 0) -> StopMatch | None:
    """The first-completing occurrence of any stop string starting at or after `search_from`."""
    best: StopMatch | None = None
    for stop in stops:
        start = text.find(stop, search_from)
        if start < 0:
            continue
        end = start + len(stop)
        if best is None or (end, start) < (best.end, best.start):
            best = StopMatch(stop, start, end)
    return best


def prefix_function(pattern: str) -> list[int]:
    """KMP failure table: fail[i] = length of the longest proper border of pattern[: i + 1]."""
    fail = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = fail[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        fail[i] = k
    return fail


class _PrefixTracker:
    """The longest prefix of one stop string that is a suffix of the text fed so far, kept up to
    date in amortised O(1) per character (a KMP automaton), so the hold-back check costs
    O(len(delta)) per token instead of O(len(stop)^2)."""

    __slots__ = ("stop", "fail", "state")

    def __init__(self, stop: str) -> None:
        self.stop, self.fail, self.state = stop, prefix_function(stop), 0

    def feed(self, text: str) -> int:
        stop, fail, k = self.stop, self.fail, self.state
        for ch in text:
            if k == len(stop):
                k = fail[k - 1]
            while k and ch != stop[k]:
                k = fail[k - 1]
            if ch == stop[k]:
                k += 1
        self.state = k
        return k if k < len(stop) else fail[k - 1]


def held_suffix_len(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of some stop string.
    Linear: only the last len(stop) - 1 characters can matter for each stop."""
    longest = 0
    for stop in stops:
        if len(stop) > 1:
            longest = max(longest, _PrefixTracker(stop).feed(text[-(len(stop) - 1) :]))
    return longest


class StopStringMatcher:
    def __init__(self, stops: Sequence[str], include_stop_str_in_output: bool = False):
        if any(not s for s in stops):
            raise ValueError("stop strings must be non-empty")
        self.stops = list(stops)
        self.include_stop = include_stop_str_in_output
        self._max_len = max((len(s) for s in self.stops), default=0)
        self._trackers = [_PrefixTracker(s) for s in self.stops if len(s) > 1]
        self._full = ""  # all text fed so far
        self._emitted = 0  # chars of _full (or of the cut text) already returned
        self.matched: str | None = None  # the stop string that ended the text, once one did

    @property
    def text(self) -> str:
        """The output text so far: emitted text, cut at the stop string once one matched."""
        return self._full[: self._emitted]

    def feed(self, delta: str) -> tuple[str, str | None]:
        """Add newly detokenized text; return (text safe to emit now, matched stop or None).
        After a match, further calls emit nothing."""
        if self.matched is not None:
            return "", self.matched
        old_len = len(self._full)
        self._full += delta
        if not self.stops:
            return self._release(len(self._full)), None
        # a new match must end in the new text, so it starts at most max_len - 1 chars earlier
        match = find_stop(self._full, self.stops, max(0, old_len - self._max_len + 1))
        if match is not None:
            self.matched = match.stop
            cut = match.end if self.include_stop else match.start
            self._full = self._full[:cut]
            return self._release(cut), match.stop
        held = max((t.feed(delta) for t in self._trackers), default=0)
        safe = len(self._full) - held
        return self._release(safe), None

    def flush(self) -> str:
        """The stream ended without a stop string: release the held-back suffix."""
        if self.matched is not None:
            return ""
        return self._release(len(self._full))

    def _release(self, upto: int) -> str:
        upto = max(upto, self._emitted)
        out = self._full[self._emitted : upto]
        self._emitted = upto
        return out
