"""`vigil demo --quick`: engine and sidecar start, a steady day and a drift event go in, and a
drift alert reaches the demo's webhook receiver with a valid signature. Minutes, not seconds:
the whole product runs (engine, embeddings, drift job, delivery)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vigil.devtools.demo import drift_alerts


def test_drift_alerts_keep_signed_drift_triggers_most_severe_first():
    def note(kind, severity, verified=True, event="trigger"):
        return {
            "verified": verified,
            "body": {
                "event": event,
                "alert": {"kind": kind, "severity": severity, "rule": f"{kind}-{severity}"},
            },
        }

    received = [
        note("monitoring", "high"),
        note("prompt", "moderate"),
        note("persona", "critical"),
        note("prompt", "critical", verified=False),
        note("model", "high", event="resolve"),
    ]
    assert [a["rule"] for a in drift_alerts(received)] == ["persona-critical", "prompt-moderate"]


def test_quick_demo_delivers_a_signed_drift_alert(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "vigil.cli", "demo", "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads(run.stdout[run.stdout.index("{\n") : run.stdout.index("\n}") + 2])
    assert summary["verified"] >= 1 and summary["verified"] == summary["deliveries"]
    assert summary["drift_rules"], summary
    # the overview's first sentence is the incident's headline
    assert summary["dashboard_leads_with_the_incident"], summary
    assert summary["dashboard_says"] == summary["headline"]
    assert summary["alert"].startswith(summary["dashboard"].rstrip("/") + "/alerts/")
    assert Path(summary["report"]).is_file()


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
