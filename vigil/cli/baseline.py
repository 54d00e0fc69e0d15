"""`vigil baseline build --from T --to T [--name N] | validate --id N | activate --id N | list`."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from storage.repositories.baselines import BaselineError, list_baselines
from vigil.config import get_settings


def _when(value: str | None, flag: str) -> datetime:
    if not value:
        raise BaselineError(f"{flag} is required (RFC 3339, e.g. 2026-11-28T00:00:00Z)")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise BaselineError(f"{flag} {value!r} is not an RFC 3339 time") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def baseline_command(args) -> int:
    from sidecar.jobs.baselines import (
        activate_baseline,
        build_baseline_from_window,
        validate_stored_baseline,
    )
    from storage.db import session_factory
    from storage.migrate import upgrade

    settings = get_settings()
    upgrade(settings.database_url)
    factory = session_factory(settings.database_url)
    now = datetime.now(UTC)
    try:
        if args.action == "build":
            result = build_baseline_from_window(
                settings, factory, _when(args.start, "--from"), _when(args.end, "--to"),
                name=args.name, now=now,
            )  # fmt: skip
            print(
                f"baseline {result.baseline_id} built (candidate): {result.num_samples} samples "
                f"frozen of {result.num_source} in the window. Next: vigil baseline validate "
                f"--id {result.baseline_id}"
            )
            return 0
        if args.id is None and args.action in ("validate", "activate"):
            raise BaselineError(f"`vigil baseline {args.action}` needs --id")
        if args.action == "validate":
            verdict = validate_stored_baseline(settings, factory, args.id, now=now)
            if verdict.valid:
                print(
                    f"baseline {args.id} validated (thresholds calibrated for windows of "
                    f"~{verdict.window_size} samples). Next: vigil baseline activate --id {args.id}"
                )
                return 0
            print(f"baseline {args.id} rejected:", file=sys.stderr)
            for reason in verdict.reasons:
                print(f"  - {reason}", file=sys.stderr)
            return 1
        if args.action == "activate":
            activate_baseline(factory, args.id, now=now, settings=settings)
            print(f"baseline {args.id} is now active (the previous active one is retired)")
            return 0
        with factory() as session:
            rows = list_baselines(session)
        if not rows:
            print("no baselines yet: vigil baseline build --from ... --to ...")
        for b in rows:
            print(
                f"{b.id:>4}  {b.status:<9}  {b.num_samples:>6} samples  "
                f"{b.window_start:%Y-%m-%d %H:%M} → {b.window_end:%Y-%m-%d %H:%M}  {b.name}"
            )
        return 0
    except BaselineError as exc:
        print(f"vigil baseline: {exc}", file=sys.stderr)
        return 2
