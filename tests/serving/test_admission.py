"""Admission counts a request as waiting from the moment it is admitted: a burst once passed the
queue check before any of its requests reached the engine (all 200, no 429). The reservation
ends when the stream starts (the engine counts it then) or when the stream is dropped unstarted."""

from __future__ import annotations

import gc
from types import SimpleNamespace

from serving.server.api.generation import admitted


async def _stream():
    yield 1


def test_a_dropped_unstarted_stream_gives_its_reservation_back():
    state = SimpleNamespace(reserved=set())
    stream = admitted(state, "a", _stream())
    other = admitted(state, "b", _stream())
    assert state.reserved == {"a", "b"}
    del stream
    gc.collect()
    assert state.reserved == {"b"}
    del other
    gc.collect()
    assert state.reserved == set()
