"""The sidecar's /metrics: drift, eval, alert, outbox, backlog and job signals read from the
database at scrape time (SQLite and PostgreSQL), parsed with prometheus_client's parser."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sidecar_servers import API_KEY

from sidecar import job_stats
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Delivery, Sample
from vigil.devtools.seed_history import seed_history

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def scrape(text: str) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def test_metrics_reflect_the_database(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as session:
        seeded = seed_history(session, hours=5, samples_per_hour=4)
        session.add(
            Delivery(
                alert_id=seeded.alert_id,
                target="http://x",
                format="generic",
                idempotency_key="k1",
                payload={},
                status="dead",
                attempts=8,
                next_attempt_at=seeded.now,
                created_at=seeded.now,
            )
        )
        session.commit()
        n_samples = session.query(Sample).count()
    job_stats.reset()
    job_stats.record_run("drift", ok=True, seconds=2.5, finished_unix=1000.0)
    job_stats.record_run("drift", ok=False, seconds=0.5, finished_unix=2000.0)
    client = TestClient(create_app(make_settings(migrated_db), factory))
    assert client.get("/metrics").status_code == 401  # same auth as the pages
    response = client.get("/metrics", headers=AUTH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    v = scrape(response.text)
    assert v["vigil_database_up{}"] == 1
    assert v["vigil_drift_statistic{feature=prompt_tokens,segment=web,test=psi}"] == 0.9
    assert v["vigil_drift_detected{feature=prompt_tokens,segment=web,test=psi}"] == 1
    assert v["vigil_drift_detected{feature=prompt_tokens,segment=api,test=psi}"] == 0
    assert (
        v["vigil_drift_threshold{direction=statistic,feature=prompt_tokens,segment=web,test=psi}"]
        == 0.2
    )
    assert (
        v["vigil_drift_threshold{direction=p_value,feature=latency_ms,segment=web,test=ks}"] == 0.01
    )
    assert v["vigil_drift_last_window_end_timestamp_seconds{}"] == seeded.now.timestamp()
    assert v["vigil_drift_runs_24h{status=done}"] == 5
    assert v["vigil_alerts_open{kind=prompt,severity=high}"] == 1
    assert v["vigil_deliveries{status=dead}"] == 1 and v["vigil_deliveries{status=pending}"] == 0
    assert v["vigil_backlog_samples{job=embed}"] == n_samples  # nothing embedded yet
    assert v["vigil_backlog_samples{job=evaluate}"] == n_samples  # no evaluate cursor yet
    assert (
        v["vigil_job_runs_total{job=drift}"] == 2 and v["vigil_job_failures_total{job=drift}"] == 1
    )
    assert v["vigil_job_duration_seconds_sum{job=drift}"] == 3.0
    assert v["vigil_job_last_success_timestamp_seconds{job=drift}"] == 1000.0
    # the seeded judge scores were written at their sample times; none in the last 24 h is old
    assert 3.0 <= v["vigil_eval_score{evaluator=judge}"] <= 5.0


def test_database_outage_is_a_value_not_a_failed_scrape(make_settings):
    from sidecar_servers import free_port

    down = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    client = TestClient(create_app(make_settings(down), session_factory(down)))
    response = client.get("/metrics", headers=AUTH)
    assert response.status_code == 200
    assert scrape(response.text)["vigil_database_up{}"] == 0
