"""The failed-authentication throttle against a brute-force replay of its history: it never
refuses an address with fewer than `max_failures` failures in the window, always refuses one with
that many while the table holds it, says how long to wait, and keeps at most `max_clients`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.auth_throttle import AuthThrottle, client_address, retry_after_header


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_failures_is_refused_until_the_oldest_leaves_the_window():
    clock = Clock()
    throttle = AuthThrottle(3, window_s=60, clock=clock)
    for _ in range(2):
        throttle.failed("a")
        clock.now += 10
    assert throttle.retry_after("a") == 0
    throttle.failed("a")  # third failure at t=1020; the first was at 1000
    assert throttle.retry_after("a") == pytest.approx(40)
    assert throttle.retry_after("b") == 0  # another address is not affected
    clock.now = 1060
    assert throttle.retry_after("a") == 0
    assert retry_after_header(0.2) == "1" and retry_after_header(40.0) == "40"


def test_bad_parameters_are_refused():
    for args in ((0,), (3, 0.0), (3, 60.0, 0)):
        with pytest.raises(ValueError):
            AuthThrottle(*args)


@settings(max_examples=150, deadline=None)
@given(
    max_failures=st.integers(1, 4),
    max_clients=st.integers(1, 4),
    events=st.lists(
        st.tuples(st.sampled_from("abcdef"), st.booleans(), st.integers(0, 40)), max_size=60
    ),
)
def test_matches_a_replay_of_the_failures(max_failures, max_clients, events):
    clock = Clock()
    throttle = AuthThrottle(max_failures, window_s=60, max_clients=max_clients, clock=clock)
    history: dict[str, list[float]] = {}
    for client, fail, advance in events:
        clock.now += advance
        wait = throttle.retry_after(client)
        recent = [t for t in history.get(client, []) if t > clock.now - 60]
        if len(recent) < max_failures:
            assert wait == 0  # never refuses below the limit
        if wait:
            assert len(recent) >= max_failures
            assert 0 < wait <= 60
        elif fail:
            throttle.failed(client)
            history.setdefault(client, []).append(clock.now)
        assert len(throttle) <= max_clients
    if (
        len(history) <= max_clients
    ):  # nothing was pushed out: refused exactly when the replay says so
        for client, times in history.items():
            recent = [t for t in times if t > clock.now - 60]
            assert (throttle.retry_after(client) > 0) == (len(recent) >= max_failures)


@given(
    peer=st.one_of(st.none(), st.text(max_size=20)),
    forwarded=st.one_of(st.none(), st.text(max_size=200)),
)
def test_client_address_is_bounded_and_trusts_only_proxies(peer, forwarded):
    address = client_address(peer, forwarded, ["10.0.0.0/8"])
    assert isinstance(address, str) and 0 < len(address) <= max(64, len(peer or "unknown"))
    assert client_address("203.0.113.9", "198.51.100.1", ["10.0.0.0/8"]) == "203.0.113.9"
    assert client_address("10.1.2.3", "198.51.100.1, 192.0.2.7", ["10.0.0.0/8"]) == "192.0.2.7"
