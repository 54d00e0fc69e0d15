"""What the sidecar's pages and on-call actions are tried against: a finished drift run, an open
alert from it and, when asked, a dead webhook delivery of that alert."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from storage.models import Alert, Delivery, DriftRun


@dataclass(frozen=True)
class SeededAlert:
    run_id: int
    alert_id: int


def seed_alert(
    factory,
    *,
    report_path: Path | None = None,
    dead_delivery: dict[str, Any] | None = None,
    **alert_fields: Any,
) -> SeededAlert:
    """A done drift run (its report at `report_path`, if given) and an open `mmd` alert from it
    (`alert_fields` override its columns); `dead_delivery` (at least `target`) adds a delivery
    of that alert that has given up."""
    now = datetime.now(UTC)
    with factory() as s:
        run = DriftRun(
            window_start=now, window_end=now, started_at=now, status="done", num_samples=5,
            report_path=str(report_path) if report_path is not None else None,
        )  # fmt: skip
        s.add(run)
        s.flush()
        alert = Alert(
            run_id=run.id, first_seen=now, last_seen=now,
            **{
                "dedupe_key": "k", "rule": "mmd", "kind": "prompt", "severity": "high",
                "segment": "*", "status": "open", "summary": "drift", "evidence": {},
                **alert_fields,
            },
        )  # fmt: skip
        s.add(alert)
        s.flush()
        if dead_delivery is not None:
            delivery = {"format": "slack", "idempotency_key": "i1", "payload": {}, **dead_delivery}
            s.add(
                Delivery(
                    alert_id=alert.id, status="dead", attempts=8, next_attempt_at=now,
                    created_at=now, **delivery,
                )
            )  # fmt: skip
        s.commit()
        return SeededAlert(run.id, alert.id)
