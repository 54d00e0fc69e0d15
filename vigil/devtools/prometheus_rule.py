"""The Prometheus Operator's PrometheusRule, generated from the one rules file.

`python -m vigil.devtools.prometheus_rule > deploy/prometheus/prometheusrule.yaml`: the groups
of `deploy/prometheus/rules.yaml` (Prometheus' own `rule_files` format) wrapped as the object
the operator reads. A test compares the committed file with this output.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

RULES_FILE = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules.yaml"
HEADER = (
    "# Generated from deploy/prometheus/rules.yaml; do not edit. Regenerate with\n"
    "#   python -m vigil.devtools.prometheus_rule > deploy/prometheus/prometheusrule.yaml\n"
)


def prometheus_rule(rules_text: str, name: str = "vigil") -> dict[str, Any]:
    groups = yaml.safe_load(rules_text)["groups"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name},
        "spec": {"groups": groups},
    }


def render(rules_text: str) -> str:
    body = yaml.safe_dump(prometheus_rule(rules_text), sort_keys=False, width=100)
    return HEADER + body


def main() -> None:
    sys.stdout.write(render(RULES_FILE.read_text()))


if __name__ == "__main__":
    main()
