"""`vigil canary baseline|run`: the engine canaries on demand, against the engine at
`VIGIL_ENGINE_URL`.

- `baseline`: calibrate now (each probe alone and inside busy batches) and make the result the
  active canary baseline. Prints the measured noise and tolerances per probe.
- `run`: one comparison run against the active canary baseline, alerts included, like the
  scheduled job. Exit 0 when every probe is within tolerance, 3 on a mismatch, 1 when there is no
  baseline or the engine is unreachable.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

from vigil.config import get_settings

EXIT_OK, EXIT_MISMATCH, EXIT_UNAVAILABLE, EXIT_BAD_INPUT = 0, 3, 1, 2


def canary_command(args) -> int:
    from sidecar.canary.client import EngineUnavailable, ProbeFailed
    from sidecar.canary.job import calibrate_now, run_canary_job
    from sidecar.canary.probes import ProbeSetError
    from storage.db import session_factory
    from storage.migrate import upgrade
    from storage.models import CanaryBaseline

    settings = get_settings()
    upgrade(settings.database_url)
    factory = session_factory(settings.database_url)
    now = datetime.now(UTC)
    try:
        if args.action == "baseline":
            outcome = calibrate_now(settings, factory, now, reason="vigil canary baseline")
            with factory() as session:
                baseline = session.get(CanaryBaseline, outcome.baseline_id)
                if baseline is None:  # calibrate_now committed it: gone means deleted meanwhile
                    print(f"vigil canary: baseline {outcome.baseline_id} vanished", file=sys.stderr)
                    return EXIT_UNAVAILABLE
                print(
                    json.dumps(
                        {
                            "baseline_id": baseline.id,
                            "probe_set": baseline.probe_set_version,
                            "engine": baseline.engine,
                            "tolerances": baseline.tolerances,
                            "noise": (baseline.calibration or {}).get("noise"),
                        },
                        indent=2,
                    )
                )
            return EXIT_OK
        outcome = run_canary_job(settings, factory, now, force_compare=True)
    except ProbeSetError as exc:
        print(f"vigil canary: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (EngineUnavailable, ProbeFailed) as exc:
        print(f"vigil canary: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    if outcome.status in ("skipped", "engine_unavailable"):
        print(f"vigil canary: {outcome.detail}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(
        json.dumps(
            {
                "run_id": outcome.run_id,
                "status": outcome.status,
                "failed": outcome.failed,
                "critical": outcome.critical,
            }
        )
    )
    return EXIT_MISMATCH if outcome.status == "mismatch" else EXIT_OK
