"""`RecordSink`: what the API server asks of the writer its sampled records go to (storage's
`SampleWriter`, or a test's list): take a record, report what became of the records, close."""

from __future__ import annotations

from typing import Protocol

from serving.traffic.logger import RecordSink as TrafficSink


class RecordSink(TrafficSink, Protocol):
    @property
    def written(self) -> int:
        """Records committed to the database directly."""
        ...

    @property
    def replayed(self) -> int:
        """Records committed later, from the journal, once the database was back."""
        ...

    @property
    def journaled(self) -> int:
        """Records waiting in the journal."""
        ...

    @property
    def dropped(self) -> int:
        """Records lost: even the journal was unwritable."""
        ...

    @property
    def rejected(self) -> int:
        """Records refused as invalid."""
        ...

    def close(self, timeout: float = 10.0) -> object:
        """Flush what is queued (commit or journal it) within `timeout` seconds."""
        ...
