"""deploy/grafana/vigil.json reads as a person needs it: template variables for the slice
(segment, test, feature), how many series (topk) and where the sidecar is (sidecar_url, never a
hard-coded host); drift panels draw the top k by × threshold, p-values on a -log10 or log scale;
every variable a query or link uses is declared, and every query is well-formed."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASH = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "vigil.json"
VARIABLE = re.compile(r"\$\{?(\w+)")
BUILTIN = {"__all", "__interval", "__rate_interval", "__range"}


def dashboard() -> dict:
    return json.loads(DASH.read_text())


def panels() -> list[dict]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def exprs(panel: dict) -> list[str]:
    return [t["expr"] for t in panel.get("targets", [])]


def balanced(expr: str) -> bool:
    """Brackets pair up outside strings, and strings close."""
    stack, pairs, quoted = [], {")": "(", "]": "[", "}": "{"}, False
    for ch in expr:
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack and not quoted


def test_template_variables_are_declared_and_used():
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert {"datasource", "segment", "test", "feature", "topk", "sidecar_url"} <= set(variables)
    assert variables["topk"]["current"]["value"] in [
        o["value"] for o in variables["topk"]["options"]
    ]
    for name in ("segment", "test", "feature"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
        assert "label_values(vigil_drift_detected" in variables[name]["query"]["query"]
    used = set()
    text = DASH.read_text()
    for match in VARIABLE.finditer(text):
        used.add(match.group(1))
    assert used - BUILTIN <= set(variables), used - set(variables)
    for panel in panels():
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_the_sidecar_is_reached_through_its_variable():
    dash = dashboard()
    default = next(v for v in dash["templating"]["list"] if v["name"] == "sidecar_url")["query"]
    links = [link["url"] for link in dash["links"]]
    for panel in panels():
        links += [link["url"] for link in panel.get("links", [])]
        links += [
            link["url"]
            for link in panel.get("fieldConfig", {}).get("defaults", {}).get("links", [])
        ]
    assert len(links) >= 4 and all(url.startswith("${sidecar_url}/") for url in links), links
    # the one place a host is written is the variable's default
    dash["templating"]["list"] = [
        v for v in dash["templating"]["list"] if v["name"] != "sidecar_url"
    ]
    rest = json.dumps(dash)
    assert default.startswith("http") and "127.0.0.1" not in rest and "localhost" not in rest


def test_drift_panels_draw_the_top_k_of_the_selection_by_times_threshold():
    drift = [
        p
        for p in panels()
        if any(re.search(r"vigil_drift_(statistic|p_value)\b", e) for e in exprs(p))
    ]
    assert len(drift) >= 3
    for panel in drift:
        for expr in exprs(panel):
            assert re.match(r"^(topk|bottomk)\(\$topk, ", expr), (
                expr
            )  # never every series of a window
            for label in ("segment", "test", "feature"):
                assert f'{label}=~"${label}"' in expr, expr
    ratio = [p for p in drift if p["fieldConfig"]["defaults"].get("unit") == "x"]
    assert len(ratio) == 2
    for panel in ratio:
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [s["value"] for s in steps] == [None, 1]  # the threshold is the line at 1×
        expr = exprs(panel)[0]
        assert "/ on (test, feature, segment) " in expr and "vigil_drift_threshold" in expr
    pvalue = [p for p in drift if "vigil_drift_p_value" in "".join(exprs(p))]
    for panel in pvalue:  # p-values only on a -log10 or a log scale
        scale = panel["fieldConfig"]["defaults"].get("custom", {}).get("scaleDistribution", {})
        assert "log10(" in "".join(exprs(panel)) or scale.get("type") == "log", panel["title"]
    assert any(
        p["fieldConfig"]["defaults"].get("custom", {}).get("scaleDistribution", {}).get("type")
        == "log"
        for p in pvalue
    )


def test_every_query_is_well_formed():
    for panel in panels():
        for expr in exprs(panel):
            assert balanced(expr), expr
            assert not re.search(r"\$\w+\s*\(|,\s*\)", expr), expr
    assert not balanced('topk($topk, x{a=~"$a"}') and balanced('topk($topk, x{a=~"(b"})')
