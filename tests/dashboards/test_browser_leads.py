"""In headless Chromium: an alert page's first sentence is its own result; a chart with a single
run spans the chosen range and still draws its threshold line across it (read back from the
canvas pixels, not from the page's data); a new tenant's page lists the alert filed under `*`
that names it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from headless import (
    needs_browser,
    served_in_browser,
    shot,
    visit,
)

from sidecar.app import create_app
from storage.db import session_factory
from vigil.devtools.seed_history import new_tenant_alert, seed_history

pytestmark = needs_browser

# the canvas row the threshold lies on: how much of the plot's width is drawn in its grey (#555)
THRESHOLD_COVERAGE = """box => {
  const canvas = box.querySelector('canvas');
  const y = Number(box.dataset.thresholdY), left = Number(box.dataset.plotLeft),
    width = Number(box.dataset.plotWidth);
  if (!canvas || !width || Number.isNaN(y)) { return {coverage: 0, xMin: null, xMax: null}; }
  const data = canvas.getContext('2d').getImageData(left, y - 1, width, 3).data;
  let drawn = 0;
  for (let x = 0; x < width; x++) {
    for (let row = 0; row < 3; row++) {
      const i = 4 * (row * width + x);
      const [r, g, b, a] = [data[i], data[i + 1], data[i + 2], data[i + 3]];
      if (a > 120 && r < 150 && Math.abs(r - g) < 25 && Math.abs(g - b) < 25) { drawn++; break; }
    }
  }
  return {coverage: drawn / width, xMin: Number(box.dataset.xMin), xMax: Number(box.dataset.xMax)};
}"""


def first_sentence(page) -> dict:
    return {
        "first_p": page.eval_on_selector("body p", "p => [p.id, p.textContent]"),
        "chart": page.eval_on_selector("#signal-chart .chart", THRESHOLD_COVERAGE),
    }


def one_chart(chart_id: str):
    return lambda page: page.eval_on_selector(f'[data-chart-id="{chart_id}"]', THRESHOLD_COVERAGE)


def test_alert_page_lead_one_point_threshold_and_a_new_tenants_alerts(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        data = seed_history(session, hours=1)  # one run: every drift chart has a single point
        session.add(new_tenant_alert(data))
        session.commit()
    with served_in_browser(create_app(make_settings(migrated_db), factory)) as (url, browser):
        started = datetime.now(UTC)
        alert = visit(
            browser,
            f"{url}/alerts/{data.alert_id}?range=7d",
            shot("alert-one-run", migrated_db),
            first_sentence,
        )
        overview = visit(
            browser,
            f"{url}/?range=30d",
            shot("overview-one-run", migrated_db),
            one_chart("psi:prompt_tokens"),
        )
        segment = visit(
            browser,
            f"{url}/segments?tenant=newco",
            shot("segment-newco", migrated_db),
            lambda page: page.eval_on_selector_all(
                "#segment-alerts tr", "rows => rows.map(r => r.innerText)"
            ),
        )
    assert alert["errors"] == [] and overview["errors"] == [] and segment["errors"] == []
    rows = segment["seen"][1:]
    assert len(rows) == 1 and "names tenant newco as new" in rows[0] and "all traffic" in rows[0], (
        rows
    )
    lead_id, lead = alert["seen"]["first_p"]
    # the first sentence is in words (what, for whom, since when); the statistics follow it
    assert lead_id == "lead" and lead.startswith(
        "The distribution of prompt length changed for segment web since "
    ), lead
    assert "p =" not in lead and "psi" not in lead
    for seen, span in (
        (alert["seen"]["chart"], timedelta(days=7)),
        (overview["seen"], timedelta(days=30)),
    ):
        # the x axis is the chosen range ending now, not a guess around the one point
        assert abs(seen["xMax"] - started.timestamp()) < 120, seen
        assert abs((seen["xMax"] - seen["xMin"]) - span.total_seconds()) < 6 * 3600 + 120, seen
        assert seen["coverage"] > 0.4, seen  # a dashed line (6 on, 4 off) across the plot
