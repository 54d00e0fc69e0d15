"""`vigil report --hours H`: run the drift job once on the last H hours and print the report path.

The ad-hoc window is stored as a drift run like any other (results, alerts through the usual
dedupe, report listed at /reports) but does not move the scheduled job's cursor.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

from vigil.config import get_settings


def report_command(args) -> int:
    from sidecar.jobs.drift import run_window
    from storage.db import session_factory
    from storage.migrate import upgrade

    hours = float(args.hours)
    if not hours > 0:
        print(f"vigil report: --hours must be positive, got {args.hours}", file=sys.stderr)
        return 2
    settings = get_settings()
    upgrade(settings.database_url)
    factory = session_factory(settings.database_url)
    now = datetime.now(UTC)
    outcome = run_window(
        settings, factory, now - timedelta(hours=hours), now, now=now,
        advance_cursor=False, resolve_absent=False,
    )  # fmt: skip
    if outcome.report_path is None:
        print(
            f"vigil report: the window was already reported (run {outcome.run_id})", file=sys.stderr
        )
        return 1
    print(f"{outcome.num_samples} samples, {len(outcome.alerts)} alerts", file=sys.stderr)
    print(outcome.report_path)
    return 0
