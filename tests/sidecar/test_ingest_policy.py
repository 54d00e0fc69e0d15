"""The ingest policy and quota: what a tenant or global key may write (weights clipped around
the engine's own 1/rate, no backdating, eval scores on their evaluator's scale, rows per minute),
and what operator keys may import."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from sidecar.app import create_app
from sidecar.evals.scales import EvalScales
from sidecar.ingest.policy import IngestPolicy
from sidecar.ingest.quota import IngestQuota
from storage.db import session_factory
from storage.models import EvalScore, Sample
from vigil.config import load_settings
from vigil.keys import Principal
from vigil.sample_record import SampleRecord

GLOBAL = "policy-global-key-0123456789"
TENANT = "policy-tenant-key-0123456789"
OTHER = "policy-other-tenant-key-0123"
OPERATOR = "policy-operator-key-0123456789"


@pytest.fixture
def app(migrated_db, make_settings):
    settings = make_settings(
        migrated_db,
        api_keys=[GLOBAL],
        tenant_keys={TENANT: "acme", OTHER: "globex"},
        operator_keys=[OPERATOR],
        sample_rate=0.1,
        ingest_rows_per_minute=50,
        eval_scales={"toxicity": (0.0, 1.0)},
    )
    app = create_app(settings, session_factory(migrated_db))
    app.state.factory = session_factory(migrated_db)
    return app


def post(app, key: str, samples: list[dict]) -> httpx.Response:
    async def go():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://s"
        ) as c:
            return await c.post(
                "/v1/ingest", json={"samples": samples}, headers={"authorization": f"Bearer {key}"}
            )

    return asyncio.run(go())


def ago(**delta) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat()


def test_weights_are_clipped_around_the_engines_rate_except_for_operators(app):
    """Was: a tenant key's sample_weight 1e6 was stored as sent (one row outweighing 5,000)."""
    r = post(
        app,
        TENANT,
        [
            {"id": "w1", "prompt": "p", "sample_weight": 1e6},
            {"id": "w2", "prompt": "p", "sample_weight": 0.001},
            {"id": "w3", "prompt": "p", "sample_weight": 10.0},
        ],
    )
    assert r.status_code == 200 and r.json()["weights_clipped"] == 2
    assert (
        post(app, GLOBAL, [{"id": "w4", "prompt": "p", "sample_weight": 5000}]).json()[
            "weights_clipped"
        ]
        == 1
    )
    assert (
        post(app, OPERATOR, [{"id": "w5", "prompt": "p", "sample_weight": 5000}]).json()[
            "weights_clipped"
        ]
        == 0
    )
    with app.state.factory() as s:
        weights = dict(s.execute(select(Sample.id, Sample.sample_weight)).all())
    # 1/rate = 10, spread 10: [1, 100]
    assert weights == {"w1": 100.0, "w2": 1.0, "w3": 10.0, "w4": 100.0, "w5": 5000.0}


def test_tenant_and_global_keys_cannot_backdate_operators_may(app):
    """Was: a tenant key could file samples in 1970, inside a future baseline's window."""
    for key in (TENANT, GLOBAL):
        r = post(
            app,
            key,
            [
                {"id": "t1", "prompt": "p", "timestamp": ago(hours=1)},
                {"id": "t2", "prompt": "p", "timestamp": 0},
            ],
        )
        assert r.status_code == 422, r.text
        assert (
            r.json()["detail"].startswith("samples[1].timestamp:")
            and "VIGIL_MAX_PAST_SKEW_S" in r.json()["detail"]
        )
    assert (
        post(app, TENANT, [{"id": "t3", "prompt": "p", "timestamp": ago(hours=1)}]).status_code
        == 200
    )
    assert (
        post(app, OPERATOR, [{"id": "t4", "prompt": "p", "timestamp": ago(days=3)}]).status_code
        == 200
    )
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert (
        post(app, OPERATOR, [{"id": "t5", "prompt": "p", "timestamp": future}]).status_code == 422
    )
    with app.state.factory() as s:
        assert set(s.scalars(select(Sample.id))) == {"t3", "t4"}


@pytest.mark.parametrize(
    ("field", "value", "scale"),
    [
        ("eval_judge", 6.0, "[1, 5] of evaluator 'judge'"),
        ("eval_toxicity", 1.5, "[0, 1] of evaluator 'toxicity'"),
        ("eval_score", 1e12, "[-100, 100] of evaluator 'default'"),
        ("eval_custom", -1e12, "[-100, 100] of evaluator 'custom'"),
    ],
)
def test_eval_scores_outside_their_evaluators_scale_are_refused(app, field, value, scale):
    """Was: any score within +-1e12 was stored, and one could swing the eval trend."""
    for key in (TENANT, OPERATOR):
        r = post(
            app,
            key,
            [
                {"id": "e0", "prompt": "p", "eval_judge": 4.0},
                {"id": "e1", "prompt": "p", field: value},
            ],
        )
        assert (
            r.status_code == 422
            and r.json()["detail"].startswith(f"samples[1].{field}:")
            and scale in r.json()["detail"]
        )
    ok = post(
        app,
        TENANT,
        [{"id": "e2", "prompt": "p", "eval_judge": 5.0, "eval_toxicity": 0.0, "eval_x": 99.0}],
    )
    assert ok.status_code == 200
    with app.state.factory() as s:
        assert sorted(s.scalars(select(EvalScore.name))) == ["judge", "toxicity", "x"]


def test_the_quota_is_per_tenant_and_answers_429_with_retry_after(app):
    batch = [{"id": f"q{i}", "prompt": "p"} for i in range(30)]
    assert post(app, TENANT, batch).status_code == 200
    r = post(app, TENANT, [{"id": f"r{i}", "prompt": "p"} for i in range(30)])
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 60
    assert "VIGIL_INGEST_ROWS_PER_MINUTE" in r.json()["detail"] and "'acme'" in r.json()["detail"]
    assert post(app, OTHER, [{"id": f"o{i}", "prompt": "p"} for i in range(30)]).status_code == 200
    assert (
        post(app, OPERATOR, [{"id": f"p{i}", "prompt": "p"} for i in range(60)]).status_code == 200
    )
    with app.state.factory() as s:
        assert (
            s.query(Sample).filter(Sample.id.like("r%")).count() == 0
        )  # nothing of the refused batch


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 120), st.integers(1, 40)), max_size=60), st.integers(1, 100))
def test_quota_never_admits_more_than_the_limit_in_any_minute(calls, limit):
    now = [0.0]
    quota = IngestQuota(limit, clock=lambda: now[0])
    admitted: list[tuple[float, int]] = []
    for step, rows in calls:
        now[0] += step / 10
        if quota.take("t", rows) == 0:
            admitted.append((now[0], rows))
    for start, _ in admitted:
        assert sum(n for t, n in admitted if start <= t < start + 60) <= limit


def test_quota_retry_after_is_when_the_batch_fits():
    now = [0.0]
    quota = IngestQuota(10, clock=lambda: now[0])
    assert quota.take("t", 6) == 0
    now[0] = 20.0
    assert quota.take("t", 4) == 0
    now[0] = 30.0
    assert quota.take("t", 5) == pytest.approx(30.0)  # the first 6 rows leave at t=60
    now[0] = 60.0
    assert quota.take("t", 5) == 0


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=1e-9, max_value=1e6, exclude_min=False),
    st.sampled_from([0.0, 1e-6, 0.01, 0.1, 1.0]),
    st.floats(1.0, 1000.0),
)
def test_policy_weights_always_land_in_the_band(weight, rate, spread):
    cfg = load_settings(sample_rate=rate, ingest_weight_spread=spread)
    policy = IngestPolicy.from_settings(cfg)
    record = SampleRecord(prompt="p", sample_weight=weight, timestamp=time.time())
    policy.apply([record], Principal("k", tenant="acme"), datetime.now(UTC))
    reference = 1 / rate if rate else 1.0
    assert (
        reference / spread * (1 - 1e-12)
        <= record.sample_weight
        <= min(reference * spread, 1e6) * (1 + 1e-12)
    )


@given(st.text(min_size=1, max_size=64), st.floats(allow_nan=False, allow_infinity=False))
def test_scales_accept_exactly_their_interval(name, score):
    scales = EvalScales(100.0, {"judge": (1.0, 5.0)})
    low, high = scales.scale(name)
    assert (scales.problem(name, score) is None) == (low <= score <= high)
