"""deploy/grafana/vigil.json and deploy/prometheus/rules.yaml only query metrics the engine and
the sidecar export: every metric name in every PromQL expression is checked against the names
a real scrape of each service exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sidecar_servers import API_KEY

from serving.outputs import CompletionOutput, EngineStats, RequestMetrics, RequestOutput
from serving.server.metrics.server_metrics import SampleCounters, ServerMetrics
from sidecar import job_stats
from sidecar.app import create_app
from storage.db import session_factory
from vigil.devtools.seed_history import seed_history

ROOT = Path(__file__).resolve().parents[2]
METRIC = re.compile(r"\b(vllm:[a-zA-Z0-9_:]+|vigil:[a-zA-Z0-9_:]+|vigil_[a-zA-Z0-9_]+)")


def metric_names(expr: str) -> set[str]:
    # label matchers, ranges and strings can hold anything: drop them before matching names
    bare = re.sub(r'"[^"]*"', "", expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", bare)
    return set(METRIC.findall(bare))


def exported_engine() -> set[str]:
    m = ServerMetrics("M", lambda: EngineStats(), lambda: SampleCounters())
    m.observe_finished(
        RequestOutput(
            "r",
            "p",
            [1, 2],
            [CompletionOutput(0, "a", "", [1, 2], finish_reason="stop")],
            True,
            RequestMetrics(1.0, 1.1, 1.2, 1.5, 1.5),
        )
    )
    return {s.name for f in text_string_to_metric_families(m.render().decode()) for s in f.samples}


def exported_sidecar(db_url: str, make_settings) -> set[str]:
    factory = session_factory(db_url)
    with factory() as session:
        seed_history(session, hours=2, samples_per_hour=2)
    job_stats.record_run("drift", ok=True, seconds=1.0, finished_unix=1.0)
    text = (
        TestClient(create_app(make_settings(db_url), factory))
        .get("/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
        .text
    )
    families = list(text_string_to_metric_families(text))
    # a gauge family is exported (HELP/TYPE) before its first sample: the canary gauges have
    # none until a canary run exists
    return {f.name for f in families if f.type == "gauge"} | {
        s.name for f in families for s in f.samples
    }


def grafana_exprs() -> list[str]:
    dash = json.loads((ROOT / "deploy/grafana/vigil.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 20
    return exprs


def rule_exprs() -> list[str]:
    doc = yaml.safe_load((ROOT / "deploy/prometheus/rules.yaml").read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    for r in rules:
        assert r["alert"] and r["labels"]["severity"] in {"critical", "high", "moderate"}, r
        assert r["annotations"]["summary"], r
    # `up{job=...}` is Prometheus's own series, not one Vigil exports
    # (tests/dashboards/test_prometheus_up.py)
    return [str(r["expr"]) for r in rules if not str(r["expr"]).startswith("up{")]


def test_metric_name_extraction():
    assert metric_names('sum by (le) (rate(vllm:ttft_bucket{model_name="a:b"}[5m])) / vigil_x') == {
        "vllm:ttft_bucket",
        "vigil_x",
    }
    assert metric_names('vigil_a{x="vigil_b"}') == {"vigil_a"}


def test_every_query_names_an_exported_metric(migrated_db, make_settings):
    exported = exported_engine() | exported_sidecar(migrated_db, make_settings)
    for expr in grafana_exprs() + rule_exprs():
        names = metric_names(expr)
        assert names, f"no Vigil or vLLM metric in {expr!r}"
        missing = names - exported
        assert not missing, f"{expr!r} queries {sorted(missing)}, not exported"


def test_grafana_panels_do_not_overlap():
    dash = json.loads((ROOT / "deploy/grafana/vigil.json").read_text())
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, p["title"]
                cells.add((x, y))
