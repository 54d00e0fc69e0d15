"""Names stored before the safe-name rule (or written past it) reach /metrics and Grafana as
data, never as exposition syntax or markup: label values round-trip exactly through
prometheus_client's parser, no series is injected, and no Grafana panel interpolates a label
into a link or renders it as HTML."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from fastapi.testclient import TestClient
from page_world import seed_alert
from prometheus_client.parser import text_string_to_metric_families
from sidecar_servers import API_KEY

from sidecar.app import create_app
from storage.db import session_factory
from storage.models import DriftResult, EvalScore, Sample

# a quote, a backslash and a newline end a label value or a line in the text exposition
HOSTILE = 'web"} vigil_injected 1\n# <script>x</script> \\'
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "vigil.json"


def test_hostile_label_values_round_trip_through_the_exposition(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    seeded = seed_alert(factory)
    now = datetime.now(UTC)
    with factory() as s:
        s.add(DriftResult(run_id=seeded.run_id, test="psi", feature=HOSTILE, segment=HOSTILE,
                          statistic=0.5, drifted=True))  # fmt: skip
        s.add(Sample(id="m-1", record_id="m-1", timestamp=now, ingested_at=now, source="ingest",
                     prompt="p", sample_weight=1.0))  # fmt: skip
        s.flush()
        s.add(EvalScore(sample_id="m-1", name=HOSTILE[:64], score=2.0, created_at=now))
        s.commit()
    text = (
        TestClient(create_app(make_settings(migrated_db), factory))
        .get("/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
        .text
    )
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert not any("injected" in name for name in families)
    drift = [s.labels for s in families["vigil_drift_statistic"].samples]
    assert {"test": "psi", "feature": HOSTILE, "segment": HOSTILE} in drift
    evaluators = [s.labels["evaluator"] for s in families["vigil_eval_score"].samples]
    assert HOSTILE[:64] in evaluators


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_grafana_never_puts_a_label_into_a_link_or_html():
    dashboard = json.loads(DASHBOARD.read_text())
    for node in _walk(dashboard):
        url = node.get("url")
        if isinstance(url, str):
            assert "__field" not in url and "__series" not in url and "{{" not in url, url
        if node.get("type") == "text":
            assert (node.get("options") or {}).get("mode") != "html", node.get("title")
    assert not dashboard["annotations"]["list"]  # no annotation text from series
