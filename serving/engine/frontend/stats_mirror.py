"""`StatsMirror`: a front-end's view of the engine's counters, read by /metrics and admission
on the event loop while another thread steps the engine (or receives the core's steps).

The engine publishes a snapshot with every step. A request the front-end has queued but the
engine has not taken yet is in no snapshot: it counts as waiting here until a snapshot that
includes it arrives (`adds_seen` catches up with `adds_sent`), so admission never sees a burst
of new requests as free room.
"""

from __future__ import annotations

import dataclasses

from serving.outputs import EngineStats


class StatsMirror:
    def __init__(self, snapshot: EngineStats | None = None) -> None:
        self.snapshot = snapshot if snapshot is not None else EngineStats()
        self.adds_sent = 0  # requests handed towards the engine
        self.adds_seen = 0  # of those, the ones the snapshot already counts (or that were dropped)

    def restart(self) -> None:
        """A new engine core counts its adds from zero."""
        self.adds_sent = self.adds_seen = 0

    def pending_adds(self) -> int:
        return max(0, self.adds_sent - self.adds_seen)

    def stats(self) -> EngineStats:
        snap = dataclasses.replace(self.snapshot)
        snap.num_waiting += self.pending_adds()
        return snap

    def num_waiting(self) -> int:
        return self.snapshot.num_waiting + self.pending_adds()

    def num_running(self) -> int:
        return self.snapshot.num_running
