"""The arguments of `write_run_report` that the report tests pass alike (helper; no tests): a
fixed hour-long window, no baseline row, no alerts, no Evidently page, every row of the window
in all traffic; a test names only what it is about."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

WINDOW = (datetime(2026, 11, 29, 10, tzinfo=UTC), datetime(2026, 11, 29, 11, tzinfo=UTC))


def report_args(
    report_dir: Path, frame: pd.DataFrame, baseline_frame: pd.DataFrame | None, **given: Any
) -> dict[str, Any]:
    return {
        "run_id": 1,
        "window": WINDOW,
        "now": datetime.now(UTC),
        "frame": frame,
        "baseline_row": None,
        "baseline_frame": baseline_frame,
        "results": [],
        "segment_sizes": {"*": {"n_current": len(frame)}},
        "alerts": [],
        "report_dir": report_dir,
        "public_url": "http://x",
        "evidently": (None, "skipped"),
        **given,
    }
