"""The report leads with the incident and reads consistently: alerts by severity, the moved
results first with the rest folded, a new tenant called new (not "too little data"), and a note
that Evidently's per-column vote does not clear Vigil's incident."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
from report_args import report_args

from dashboards.report import build


def result(test, feature, segment, drifted, statistic=0.1, insufficient=False):
    return {"test": test, "feature": feature, "segment": segment, "statistic": statistic,
            "p_value": None, "threshold": 0.2, "drifted": drifted, "insufficient": insufficient,
            "detail": {}}  # fmt: skip


def alert(i, severity):
    return SimpleNamespace(id=i, rule=f"rule{i}", severity=severity, segment="*", summary="s")


def test_report_order_folding_and_words(tmp_path):
    frame = pd.DataFrame({"prompt": ["q"] * 30, "tenant": ["newco"] * 20 + ["acme"] * 10})
    results = [
        result("psi", "latency_ms", "*", False),
        result("psi", "prompt_tokens", "tenant=acme", True, 0.5),
        result("psi", "prompt_tokens", "tenant=newco", False, insufficient=True),
        result("psi", "completion_tokens", "*", True, 0.9),
    ]
    incident = {"id": 4, "headline": "New tenant newco is 67 % of traffic", "severity": "high",
                "url": "http://x/incidents/4"}  # fmt: skip
    path = build.write_run_report(**report_args(
        tmp_path, frame, pd.DataFrame({"prompt": ["q"]}), results=results,
        alerts=[alert(1, "moderate"), alert(2, "critical"), alert(3, "review"), alert(4, "high")],
        segment_sizes={"*": {"n_current": 30, "n_reference": 40},
                       "tenant=newco": {"n_current": 20, "n_reference": 0},
                       "tenant=acme": {"n_current": 10, "n_reference": 40}},
        incident=incident,
    ))  # fmt: skip
    html = path.read_text()
    assert html.index("incident-headline") < html.index("Alerts raised")
    assert "(high)" in html.split('id="incident-headline"')[1].split("</p>")[0]
    assert "does not clear this incident" in html
    alerts = html.split("<h2>Alerts raised</h2>")[1].split("</table>")[0]
    order = [alerts.index(f"rule{i}<") for i in (2, 4, 1, 3)]
    assert order == sorted(order)  # critical, high, moderate, review
    moved = html.split('id="moved-results">')[1].split("</table>")[0]
    assert moved.count("<tr") == 3 and moved.index("completion_tokens") < moved.index("acme")
    assert html.index('id="moved-results"') < html.index('<details id="unmoved">')
    folded = html.split('<details id="unmoved">')[1].split("</details>")[0]
    assert "2 results that did not move" in folded and "latency_ms" in folded
    segments = html.split("<h2>Per-segment summary</h2>")[1].split("</table>")[0]
    newco = segments.split("tenant=newco")[1].split("</tr>")[0]
    assert "new in this window" in newco and "too little data" not in newco
