"""An alert's first sentence is in the on-call's words — what moved, by how much in the
feature's unit, for whom, since when — never a test name or p-value; a permutation p-value at
its floor never reads as "1.0× threshold" and never ranks a big shift with a small one; each
alert page's example prompts come from its own signal (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY

from dashboards.alert_lead import Row, result_phrase
from dashboards.alert_words import effect_sentence, effect_size
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, DriftResult, DriftRun, Sample
from vigil.devtools.seed_history import new_tenant_alert, new_tenant_result, seed_history

VIEW = {"Authorization": f"Bearer {API_KEY}"}
SINCE = datetime(2026, 12, 3, 7, 12, tzinfo=UTC)
FEATURES = ["prompt_tokens", "completion_tokens", "latency_ms", "prompt_embedding", "tenant"]


def numeric(feature: str, before: float, after: float, segment: str = "tenant=acme") -> Row:
    detail = {"reference_median": before, "window_median": after}
    return Row("psi", feature, segment, 0.4, None, 0.2, True, detail=detail)


def test_the_sentence_says_how_much_in_the_features_unit():
    assert effect_sentence(numeric("completion_tokens", 120, 74), "s", SINCE) == (
        "Answers are 38 % shorter (median 120 → 74 tokens) for tenant acme"
        " since 2026-12-03 07:12 UTC."
    )
    assert effect_sentence(numeric("prompt_tokens", 80, 170, "*"), "s", SINCE).startswith(
        "Prompt length doubled (median 80 → 170 tokens) for all traffic since"
    )
    assert effect_sentence(numeric("latency_ms", 400, 520, "segment=web"), "s", None) == (
        "Requests are 30 % slower (median 400 → 520 ms) for segment web."
    )


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    test=st.sampled_from(["psi", "ks", "mmd", "cluster_mix", "new_cluster", "wasserstein"]),
    feature=st.sampled_from(FEATURES),
    p=st.floats(1e-300, 0.01),
    before=st.floats(1, 1e4),
    after=st.floats(1, 1e4),
    with_centres=st.booleans(),
)
def test_no_statistics_in_the_first_sentence(test, feature, p, before, after, with_centres):
    detail = {"reference_median": before, "window_median": after} if with_centres else {}
    row = Row(test, feature, "tenant=acme", 3.0, p, 0.001, True, detail=detail)
    sentence = effect_sentence(row, "s", SINCE)
    assert sentence.endswith("for tenant acme since 2026-12-03 07:12 UTC.")
    assert "p =" not in sentence and "threshold" not in sentence and f"{test} " not in sentence
    if with_centres:  # the change, recomputed: the sentence's percentage or factor
        change = after / before - 1
        if -0.5 < change < 1.0 and round(abs(change) * 100) > 0:
            assert f"{abs(change):.0%}".replace("%", " %") in sentence, sentence


def test_a_permutation_floor_is_told_as_a_floor_and_ranked_by_the_statistic():
    big = Row("mmd", "prompt_embedding", "*", 0.9, 1 / 1001, 0.001, True,
              detail={"permutations": 1000, "effect_floor": 0.01})  # fmt: skip
    small = Row("mmd", "prompt_embedding", "web", 0.02, 1 / 1001, 0.001, True,
                detail={"permutations": 1000, "effect_floor": 0.01})  # fmt: skip
    for r in (big, small):
        phrase = result_phrase(r)
        assert "×" not in phrase and "the smallest its 1000 permutations can give" in phrase
    assert effect_size(big) > 10 * effect_size(small)  # the p-values are equal


def test_each_alert_shows_prompts_from_its_own_signal(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=2, samples_per_hour=30)
        run = s.get(DriftRun, data.drift_run_id)
        window = (
            s.query(Sample)
            .filter(Sample.timestamp >= run.window_start, Sample.timestamp < run.window_end)
            .order_by(Sample.id)
            .all()
        )
        for i, sample in enumerate(window):
            sample.prompt_tokens = 10 + i
            sample.prompt = f"prompt {i}" + (" for newco" if i % 3 == 0 else "")
            sample.tenant = "newco" if i % 3 == 0 else "acme"
        longest = [f"prompt {i}" for i in range(len(window) - 1, -1, -1)][:8]
        s.add(new_tenant_result(data))
        s.get(DriftResult, _psi_web(s, run.id)).detail = {
            "reference_median": 10.0, "window_median": 30.0, "n_current": len(window)
        }  # fmt: skip
        s.get(DriftResult, _psi_web(s, run.id)).segment = "*"
        s.get(Alert, data.alert_id).evidence = {"results": [
            {"test": "psi", "feature": "prompt_tokens", "segment": "*", "drifted": True}
        ]}  # fmt: skip
        tenant_alert = new_tenant_alert(data)
        s.add(tenant_alert)
        s.commit()
        ids = (data.alert_id, tenant_alert.id)
    client = TestClient(create_app(make_settings(migrated_db), factory))
    shown = []
    for alert_id in ids:
        html = client.get(f"/alerts/{alert_id}", headers=VIEW).text
        shown.append(html.split('id="examples">')[1].split("</ol>")[0])
    longer, newco = shown
    assert all(f"<li>{p}" in longer for p in longest), (longer, longest)  # length rose: the longest
    assert newco.count("<li>") == 8 and newco.count("for newco</li>") == 8  # the new tenant's
    assert longer != newco


def _psi_web(s, run_id: int) -> int:
    return (
        s.query(DriftResult.id)
        .filter_by(run_id=run_id, test="psi", feature="prompt_tokens", segment="web")
        .scalar()
    )
