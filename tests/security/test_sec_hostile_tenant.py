"""A hostile tenant, on SQLite and PostgreSQL: a baseline, then a window in which tenant acme's
traffic drifts while tenant globex tries every trick it has against the monitor — squatting
acme's sample ids, huge weights, backdating into the baseline, huge eval scores, filing traffic
under acme and hiding its own through a global key's `metadata` and internal mark, and a flood.
Each trick is refused or bounded (one test each, each failing on the code before these
bounds), nothing of acme's is lost, and acme's drift still reaches a real webhook receiver as a
signed alert.

The tests of one database share one world and run in file order: the tricks, then the window.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sidecar_servers import WebhookReceiver
from sidecar_world import prepare
from sqlalchemy import func, select
from starlette.requests import Request
from traffic_gen import traffic

from alerts.signing import verify
from alerts.worker import DeliveryWorker
from serving.server.base.auth import request_segment
from sidecar.app import create_app
from sidecar.jobs.drift import run_drift_job
from sidecar.jobs.embed import run_embed_job
from storage.db import session_factory
from storage.models import Alert, EvalScore, Sample
from vigil.config import load_settings
from vigil.keys import KeyRing

ACME_KEY = "hostile-acme-key-0123456789"
GLOBEX_KEY = "hostile-globex-key-0123456789"  # the hostile tenant's own key
GLOBEX_APP_KEY = "hostile-globex-app-0123456789"  # a global key globex's app was given
OPERATOR_KEY = "hostile-operator-key-0123456789"
SECRET = "hostile-tenant-webhook-secret-0123"
QUOTA = 400  # rows per minute per tenant
N_ACME = 120


class World:
    def __init__(self, url: str, tmp, receiver: WebhookReceiver) -> None:
        self.settings = load_settings(
            database_url=url,
            report_dir=tmp / "reports",
            journal_dir=tmp / "journal",
            api_keys=[GLOBEX_APP_KEY],
            tenant_keys={ACME_KEY: "acme", GLOBEX_KEY: "globex"},
            operator_keys=[OPERATOR_KEY],
            sample_rate=1.0,
            ingest_rows_per_minute=QUOTA,
            webhook_targets=[receiver.url],
            webhook_secret=SECRET,
            delivery_poll_interval_s=0.2,
            secret_key="hostile-session-secret-0123456789",
            public_url="http://127.0.0.1:8001",
        )
        self.factory = session_factory(url)
        self.receiver = receiver
        prepare(self.settings, self.factory, None, n_baseline=240, n_drift=0)
        self.app = create_app(self.settings, self.factory)
        start, self.end = _window(self.settings)
        # acme's drifted hour (a third on a new topic), stamped within the last two hours
        self.start = max(start, datetime.now(UTC) - timedelta(seconds=6600))
        self.acme = traffic(self.start, self.end, N_ACME, seed=41, new_topic_share=0.35)

    def ingest(self, key: str, samples: list[dict]) -> httpx.Response:
        async def go():
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=self.app), base_url="http://s"
            ) as c:
                return await c.post(
                    "/v1/ingest",
                    json={"samples": samples},
                    headers={"authorization": f"Bearer {key}"},
                )

        return asyncio.run(go())

    def globex(self, n: int, seed: int, **fields) -> list[dict]:
        records = traffic(self.start, self.end, n, seed=seed)
        for record in records:
            record.update({"tenant": "globex", **fields})
        return records

    def count(self, *terms) -> int:
        with self.factory() as s:
            return int(s.scalar(select(func.count()).select_from(Sample).where(*terms)))


def _window(settings) -> tuple[datetime, datetime]:
    now = datetime.now(UTC).timestamp()
    end = datetime.fromtimestamp(now - now % settings.drift_interval_s, UTC)
    return end - timedelta(seconds=settings.drift_interval_s), end


@pytest.fixture(scope="module")
def world(migrated_db_module, tmp_path_factory, embedder):
    with WebhookReceiver() as receiver:
        yield World(migrated_db_module, tmp_path_factory.mktemp("hostile"), receiver)


def test_squatting_acmes_ids_neither_drops_acmes_samples_nor_tells_which_exist(world):
    """Was: ids were global; globex sending acme's ids first made acme's own samples
    'duplicates' (dropped), and a duplicate count told globex which ids acme had used."""
    squat = world.globex(40, seed=42)
    for mine, theirs in zip(squat, world.acme, strict=False):
        mine["id"] = theirs["id"]
    first = world.ingest(GLOBEX_KEY, squat)
    assert first.status_code == 200 and first.json()["inserted"] == 40
    r = world.ingest(ACME_KEY, world.acme)
    assert r.status_code == 200, r.text
    assert r.json()["inserted"] == N_ACME and r.json()["duplicates"] == 0
    probe = world.globex(1, seed=43)
    probe[0]["id"] = world.acme[-1]["id"]  # an id acme has used and globex has not
    assert world.ingest(GLOBEX_KEY, probe).json()["duplicates"] == 0


def test_huge_weights_are_clipped(world):
    """Was: sample_weight 1e6 was stored as sent, and one row blinded the whole-window tests."""
    heavy = world.globex(20, seed=44, sample_weight=1e6)
    r = world.ingest(GLOBEX_KEY, heavy)
    assert r.status_code == 200
    with world.factory() as s:
        top = s.scalar(select(func.max(Sample.sample_weight)).where(Sample.tenant == "globex"))
    assert top == 10.0  # 1 / VIGIL_SAMPLE_RATE times the spread (10)
    assert r.json()["weights_clipped"] == 20


def test_backdating_into_the_baseline_is_refused(world):
    """Was: a tenant key could stamp samples in 1970, or inside a (future) baseline's window."""
    for stamp in (0, (world.start - timedelta(hours=3)).timestamp()):
        old = world.globex(5, seed=45)
        old[-1]["timestamp"] = stamp
        r = world.ingest(GLOBEX_KEY, old)
        assert r.status_code == 422 and "VIGIL_MAX_PAST_SKEW_S" in r.json()["detail"]
    assert (
        world.count(Sample.tenant == "globex", Sample.timestamp < world.start - timedelta(hours=1))
        == 0
    )


def test_huge_eval_scores_are_refused(world):
    """Was: eval scores up to +-1e12 were stored and could swing the eval trend."""
    for field in ("eval_judge", "eval_score", "eval_helpfulness"):
        r = world.ingest(GLOBEX_KEY, world.globex(3, seed=46, **{field: 1e12}))
        assert (
            r.status_code == 422 and f"samples[0].{field}: 1e+12 is outside" in r.json()["detail"]
        )
    with world.factory() as s:
        assert (
            s.scalar(
                select(func.count()).select_from(EvalScore).where(func.abs(EvalScore.score) > 100)
            )
            == 0
        )


def _engine_request(key: str, headers: dict[str, str]) -> Request:
    principal = KeyRing.from_settings(_SETTINGS_FOR_KEYS).lookup(key)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("203.0.113.9", 4000),
        "state": {"principal": principal},
    }
    return Request(scope)


_SETTINGS_FOR_KEYS = load_settings(
    api_keys=[GLOBEX_APP_KEY],
    tenant_keys={ACME_KEY: "acme", GLOBEX_KEY: "globex"},
    operator_keys=[OPERATOR_KEY],
)


def test_a_global_key_cannot_file_traffic_under_acme(world):
    """Was: a global key's `metadata: {tenant, segment}` filed its engine traffic under any
    tenant, and its ingest could name any tenant."""
    seg = request_segment(
        _engine_request(GLOBEX_APP_KEY, {}),
        world.settings,
        None,
        {"tenant": "acme", "segment": "web"},
    )
    assert (seg.tenant, seg.segment) == (None, None)
    r = world.ingest(GLOBEX_APP_KEY, world.globex(3, seed=47, tenant="acme"))
    assert r.status_code == 403
    assert world.ingest(GLOBEX_KEY, world.globex(3, seed=48, tenant="acme")).status_code == 403


def test_a_global_key_cannot_hide_its_traffic_as_internal(world):
    """Was: X-Vigil-Internal from a global key kept its traffic out of the log."""
    seg = request_segment(
        _engine_request(GLOBEX_APP_KEY, {"X-Vigil-Internal": "canary"}), world.settings, None, None
    )
    assert seg.internal is None
    operator = request_segment(
        _engine_request(OPERATOR_KEY, {"X-Vigil-Internal": "canary"}), world.settings, None, None
    )
    assert operator.internal == "canary"  # the sidecar's own probes still are internal


def test_a_flood_is_held_to_the_tenants_quota(world):
    """Was: no quota; one tenant could write as fast as the database took rows."""
    statuses = [world.ingest(GLOBEX_KEY, world.globex(100, seed=60 + i)) for i in range(5)]
    codes = [r.status_code for r in statuses]
    assert 429 in codes and int(statuses[codes.index(429)].headers["Retry-After"]) >= 1
    assert (
        world.ingest(
            ACME_KEY, [{"prompt": "still served", "timestamp": time.time() - 60}]
        ).status_code
        == 200
    )


def test_acmes_drift_reaches_a_signed_webhook_and_nothing_of_acmes_is_lost(world):
    assert world.count(Sample.tenant == "acme", Sample.timestamp >= world.start) == N_ACME + 1
    with world.factory() as s:  # acme's rows as sent: ids, weights
        stored = dict(
            s.execute(
                select(Sample.record_id, Sample.sample_weight).where(
                    Sample.tenant == "acme", Sample.timestamp >= world.start
                )
            ).all()
        )
    assert {r["id"] for r in world.acme} <= set(stored) and {
        stored[r["id"]] for r in world.acme
    } == {1.0}
    run_embed_job(world.settings, world.factory, datetime.now(UTC))
    [window] = run_drift_job(world.settings, world.factory, datetime.now(UTC)).windows
    assert window.status == "done"
    with world.factory() as s:
        alerts = list(s.scalars(select(Alert)))
    about_acme = [a for a in alerts if a.segment in ("*", "tenant=acme") and a.kind != "persona"]
    assert about_acme, [(a.rule, a.segment, a.summary) for a in alerts]
    worker = DeliveryWorker(world.factory, settings=world.settings).start()
    try:
        deadline = time.monotonic() + 30
        while not _delivered_about_acme(world.receiver) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.stop()
    delivered = _delivered_about_acme(world.receiver)
    assert delivered, [json.loads(raw)["alert"]["rule"] for _, _, raw in world.receiver.received]


def _delivered_about_acme(receiver: WebhookReceiver) -> list[dict]:
    out = []
    with receiver.lock:
        received = list(receiver.received)
    for _path, headers, raw in received:
        verify(raw, headers, SECRET)  # raises on a bad signature
        body = json.loads(raw)  # one notification per incident: its members say what it is about
        for alert in body.get("incident", {}).get("members") or [body["alert"]]:
            if alert.get("segment") in ("*", "tenant=acme") and alert.get("kind") != "persona":
                out.append(alert)
    return out
