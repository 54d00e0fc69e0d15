"""deploy/prometheus/rules.yaml watches both services from outside: `up == 0` and `absent()`
rules for the engine and the sidecar (a service that is down cannot page about itself), and the
file passes `promtool check rules` where promtool is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

RULES = Path(__file__).resolve().parents[2] / "deploy/prometheus/rules.yaml"


def _rules() -> dict[str, dict]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"]}


@pytest.mark.parametrize(
    "job, absent",
    [("vigil-engine", "vllm:num_requests_running"), ("vigil-sidecar", "vigil_database_up")],
)
def test_each_service_has_an_up_and_an_absent_rule(job, absent):
    rules = _rules()
    exprs = {r["expr"].replace(" ", ""): r for r in rules.values()}
    down = exprs.get(f'up{{job="{job}"}}==0')
    gone = exprs.get(f"absent({absent})")
    for rule in (down, gone):
        assert rule is not None, sorted(exprs)
        assert (
            rule["labels"]["severity"] == "critical"
            and rule["for"]
            and rule["annotations"]["summary"]
        )


def test_promtool_accepts_the_rules():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    run = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
