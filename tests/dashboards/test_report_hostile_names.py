"""A drift report holds no script of its own and hands no client-chosen name to Evidently: eval
score columns reach Evidently renamed, Evidently's page is a separate file framed with
`sandbox="allow-scripts"` (no `allow-same-origin`) and served under its own sandboxing CSP."""

from __future__ import annotations

import asyncio
import re

import httpx
import numpy as np
import pandas as pd
from page_world import seed_alert
from report_args import report_args
from sidecar_servers import API_KEY

import dashboards.report.build as build
from dashboards.report.evidently_part import NUMERIC_FEATURES
from dashboards.report.render import evidently_path
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import DriftRun
from vigil.security_headers import EVIDENTLY_CSP, REPORT_CSP

EVAL_COLUMN = "eval_x</script><script>window.__pwned=1</script>"


def _frame(seed: int, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = {c: rng.gamma(3.0, 10.0, n) for c in NUMERIC_FEATURES}
    data[EVAL_COLUMN] = rng.normal(3.0 + seed, 1.0, n)
    data["eval_judge"] = rng.normal(4.0, 0.5, n)
    return pd.DataFrame(data)


def test_evidently_never_sees_a_client_chosen_column_name(tmp_path):
    part = build.evidently_part(_frame(1), _frame(0), max_rows=200, seed=0)
    assert part.html is not None, part.why_not
    assert "__pwned" not in part.html and "eval_judge" not in part.html
    assert dict(part.columns) == {"eval_1": "eval_judge", "eval_2": EVAL_COLUMN}
    assert "mean_logprob" in part.html  # Vigil's own feature names are kept

    path = build.write_run_report(
        **report_args(tmp_path, _frame(1), _frame(0), run_id=3, evidently=part)
    )
    page = path.read_text()
    assert "<script" not in page.lower()  # Vigil's document runs no script at all
    frames = re.findall(r"<iframe[^>]*>", page)
    assert len(frames) == 1 and 'sandbox="allow-scripts"' in frames[0], frames
    assert 'src="3/evidently"' in frames[0]
    assert "eval_2 is eval_x&lt;/script&gt;&lt;script&gt;" in page  # the legend, escaped
    assert "eval_2" in evidently_path(path).read_text()


def _get(app, path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://s") as client:
            return await client.get(path, headers={"Authorization": f"Bearer {API_KEY}"})

    return asyncio.run(go())


def test_the_report_runs_no_script_and_its_evidently_page_is_sandboxed(
    migrated_db, make_settings, tmp_path
):
    factory = session_factory(migrated_db)
    seeded = seed_alert(factory)
    part = build.evidently_part(_frame(1), _frame(0), max_rows=200, seed=0)
    path = build.write_run_report(
        **report_args(tmp_path, _frame(1), _frame(0), run_id=seeded.run_id, evidently=part)
    )
    with factory() as s:
        s.get(DriftRun, seeded.run_id).report_path = str(path)
        s.commit()
    app = create_app(make_settings(migrated_db), factory)
    report = _get(app, f"/reports/{seeded.run_id}")
    assert report.status_code == 200 and report.headers["content-security-policy"] == REPORT_CSP
    script_src = re.search(r"script-src ([^;]*)", REPORT_CSP)
    assert script_src and script_src.group(1) == "'none'"
    evidently = _get(app, f"/reports/{seeded.run_id}/evidently")
    assert evidently.status_code == 200 and "mean_logprob" in evidently.text
    csp = evidently.headers["content-security-policy"]
    assert csp == EVIDENTLY_CSP and csp.startswith("sandbox allow-scripts;")
    assert "allow-same-origin" not in csp and "connect-src" not in csp
    assert evidently.headers["x-frame-options"] == "SAMEORIGIN"
    evidently_path(path).unlink()
    assert _get(app, f"/reports/{seeded.run_id}/evidently").status_code == 404
