"""Stop strings over streamed text: the streamed result equals a brute-force character-by-character
scan, nothing emitted is ever taken back, and no partial stop string leaks."""

from __future__ import annotations

import random

import pytest

from serving.stop import StopStringMatcher, find_stop, held_suffix_len


def brute_force(text: str, stops: list[str], include: bool) -> tuple[str, str | None]:
    """Walk the text one character at a time; stop at the first position a stop string ends
    (the longest one ending there, i.e. the earliest start)."""
    for end in range(1, len(text) + 1):
        hits = [s for s in stops if text[:end].endswith(s)]
        if hits:
            stop = max(hits, key=len)
            return (text[:end] if include else text[: end - len(stop)]), stop
    return text, None


def run(text: str, stops: list[str], include: bool, rng: random.Random):
    matcher = StopStringMatcher(stops, include_stop_str_in_output=include)
    emitted, matched, pos = "", None, 0
    while pos < len(text):
        step = rng.randint(1, 6)
        delta, matched = matcher.feed(text[pos : pos + step])
        pos += step
        # deltas only ever append: if any shown character (a partial stop string, say) were
        # wrong, the concatenation below could not equal the brute-force result
        emitted += delta
        if matched is not None:
            break
    emitted += matcher.flush()
    assert matcher.text == emitted
    return emitted, matched


@pytest.mark.parametrize("include", [False, True])
def test_streamed_equals_brute_force(include):
    rng = random.Random(11)
    stop_sets = [["abc"], ["ca", "abc"], ["bb b", "c"], ["aaa", "ab", "b a"], ["xyz"], []]
    for _ in range(600):
        text = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 40)))
        stops = rng.choice(stop_sets)
        got = run(text, stops, include, rng)
        assert got == brute_force(text, stops, include), (text, stops)


def test_partial_stop_is_held_back_then_released():
    m = StopStringMatcher(["Observation:"])
    assert m.feed("The answer. Obs") == ("The answer. ", None)
    assert m.feed("erv") == ("", None)
    assert m.feed("ed it") == ("Observed it", None)  # not a stop after all: released
    assert m.feed(" Observation: x") == (" ", "Observation:")
    assert m.text == "The answer. Observed it "
    assert m.feed("more") == ("", "Observation:")  # nothing after a match
    assert m.flush() == ""


def test_flush_releases_held_suffix():
    m = StopStringMatcher(["</end>"])
    assert m.feed("done </e") == ("done ", None)
    assert m.flush() == "</e"
    assert m.text == "done </e"


def test_include_stop_string():
    m = StopStringMatcher(["\n\n"], include_stop_str_in_output=True)
    assert m.feed("para\n") == ("para", None)
    assert m.feed("\nnext") == ("\n\n", "\n\n")
    assert m.text == "para\n\n"


def test_first_completing_stop_wins():
    assert find_stop("xabcd", ["abcd", "bc"]).stop == "bc"  # "bc" completes before "abcd"
    match = find_stop("xabc", ["bc", "abc"])
    assert (match.stop, match.start, match.end) == ("abc", 1, 4)  # same end: earlier start
    assert find_stop("hello", ["z"]) is None


def test_held_suffix_len_brute_force():
    rng = random.Random(5)
    for _ in range(300):
        text = "".join(rng.choice("ab") for _ in range(rng.randint(0, 10)))
        stops = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 5))) for _ in range(2)]
        want = max(
            [
                n
                for n in range(len(text) + 1)
                for s in stops
                if 0 < n < len(s) and text.endswith(s[:n])
            ],
            default=0,
        )
        assert held_suffix_len(text, stops) == want


def test_no_stops_passes_through_and_empty_stop_rejected():
    m = StopStringMatcher([])
    assert m.feed("abc") == ("abc", None)
    with pytest.raises(ValueError, match="non-empty"):
        StopStringMatcher(["ok", ""])
