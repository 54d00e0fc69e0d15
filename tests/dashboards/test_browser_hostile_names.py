"""Hostile names in every field a client controls never run script on any page or report, in
headless Chromium. The rows are written straight to the database, past the ingest rules (as rows
stored before those rules, or by a path that forgot them), so what is tested is the pages'
and the report's own escaping, renaming and sandboxing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import numpy as np
import pandas as pd
import pytest
from headless import AUTH, needs_browser, served_in_browser
from page_world import seed_alert
from report_args import report_args

import dashboards.report.build as build
from dashboards.report.evidently_part import NUMERIC_FEATURES
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import DriftResult, DriftRun, EvalScore, Sample

pytestmark = needs_browser

# each part runs script in its own context: an attribute, an element, a script block, a JSON
# string inside a <script>
PAYLOAD = '"><img src=x onerror=__pwned=1><script>__pwned=1</script>'
EVAL_COLUMN = f"eval_{PAYLOAD}"


def _frame(seed: int, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = {c: rng.gamma(3.0, 10.0, n) for c in NUMERIC_FEATURES}
    data[EVAL_COLUMN] = rng.normal(3.0 + seed, 1.0, n)
    data["segment"] = [PAYLOAD] * n
    data["tenant"] = [PAYLOAD] * n
    data["prompt"] = [f"{PAYLOAD} question {i}" for i in range(n)]
    data["timestamp"] = [datetime(2026, 11, 29, 10, tzinfo=UTC).isoformat()] * n
    return pd.DataFrame(data)


def _seed(factory, report_dir) -> tuple[int, int]:
    now = datetime.now(UTC)
    with factory() as s:
        for i in range(3):
            s.add(Sample(
                id=f"h-{i}", record_id=f"h-{i}", timestamp=now - timedelta(minutes=i),
                ingested_at=now, source="ingest", tenant=PAYLOAD, segment=PAYLOAD,
                prompt_version=PAYLOAD, model_version=PAYLOAD, prompt=PAYLOAD, response=PAYLOAD,
                finish_reason="stop", tools=[PAYLOAD], sample_weight=1.0, latency_ms=10.0,
                extra={PAYLOAD: PAYLOAD, "metadata": {PAYLOAD: PAYLOAD}},
            ))  # fmt: skip
        s.flush()
        for i in range(3):
            s.add(EvalScore(sample_id=f"h-{i}", name=PAYLOAD, score=3.0, created_at=now))
        s.commit()
    seeded = seed_alert(factory, segment=f"segment={PAYLOAD}", summary=PAYLOAD,
                        evidence={PAYLOAD: PAYLOAD})  # fmt: skip
    current, reference = _frame(1), _frame(0)
    results = [{"test": "ks", "feature": EVAL_COLUMN, "segment": f"segment={PAYLOAD}",
                "statistic": 0.5, "p_value": 0.001, "threshold": 0.1, "drifted": True,
                "insufficient": False, "detail": {}}]  # fmt: skip
    evidently = build.evidently_part(current, reference, max_rows=200, seed=0)
    assert evidently.html is not None, evidently.why_not
    path = build.write_run_report(**report_args(
        report_dir, current, reference, run_id=seeded.run_id, evidently=evidently,
        results=results, segment_sizes={"*": {"n_current": 60}, f"segment={PAYLOAD}": {}},
    ))  # fmt: skip
    with factory() as s:
        run = s.get(DriftRun, seeded.run_id)
        run.report_path = str(path)
        s.add(DriftResult(run_id=run.id, test="ks", feature=EVAL_COLUMN[:128],
                          segment=f"segment={PAYLOAD}", statistic=0.5, p_value=0.001,
                          threshold=0.1, drifted=True, insufficient=False))  # fmt: skip
        s.commit()
    return seeded.run_id, seeded.alert_id


def _pwned(browser, url: str) -> dict:
    """Open `url`; whether any frame ran the payload, any dialog opened, and the frames seen."""
    context = browser.new_context(extra_http_headers=AUTH)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url, wait_until="load")
    page.wait_for_timeout(300)  # let onerror handlers of broken images fire
    ran = []
    for frame in page.frames:
        try:
            ran.append(frame.evaluate("() => typeof window.__pwned !== 'undefined'"))
        except Exception:  # noqa: BLE001 - a frame the CSP forbids eval in ran nothing either
            ran.append(False)
    seen = {
        "ran": any(ran),
        "dialogs": dialogs,
        "frames": [f.url for f in page.frames],
        "evidently": [f.content() for f in page.frames if f.url.endswith("/evidently")],
    }
    context.close()
    return seen


@pytest.mark.parametrize("migrated_db", ["sqlite"], indirect=True)  # what pages do, not storage
def test_hostile_names_never_run_script_on_a_page_or_report(migrated_db, make_settings, tmp_path):
    factory = session_factory(migrated_db)
    run_id, alert_id = _seed(factory, tmp_path / "reports")
    pages = ["/", "/reports", f"/reports/{run_id}", f"/reports/{run_id}/evidently", "/alerts",
             f"/alerts/{alert_id}", "/segments", f"/clusters/{run_id}",
             f"/segments/{quote(PAYLOAD, safe='')}/{quote(PAYLOAD, safe='')}"]  # fmt: skip
    with served_in_browser(create_app(make_settings(migrated_db), factory)) as (url, browser):
        seen = {path: _pwned(browser, url + path) for path in pages}
    for path, got in seen.items():
        assert not got["ran"] and got["dialogs"] == [], (path, got["frames"])
    report = seen[f"/reports/{run_id}"]
    assert len(report["frames"]) == 2  # the report framed its Evidently page, which loaded
    assert "eval_1" in report["evidently"][0] and "__pwned" not in report["evidently"][0]
