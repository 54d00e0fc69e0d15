"""Evaluators: the G-Eval score, relevancy and refusal against independent oracles, and the
evaluate job surviving an engine outage without losing a sample (SQLite and PostgreSQL)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sidecar_servers import JudgeEngine, judge_distribution
from sqlalchemy import func, select
from traffic_gen import traffic

from sidecar.evals.judge import EngineUnavailable, Judge, judge_messages, score_from_top_logprobs
from sidecar.evals.refusal import detect_refusal
from sidecar.evals.relevancy import relevancy
from sidecar.jobs.evaluate import SETTLE_S, chosen, run_evaluate_job
from storage.db import session_factory
from storage.models import EvalScore
from storage.repositories.samples import insert_samples


def test_geval_score_is_the_probability_weighted_digit_mean():
    top = [
        {"token": "4", "logprob": math.log(0.5)},
        {"token": " 3", "logprob": math.log(0.2)},
        {"token": "five", "logprob": math.log(0.2)},
        {"token": "1", "logprob": math.log(0.1)},
    ]
    j = score_from_top_logprobs(top)
    assert j.score == pytest.approx((4 * 0.5 + 3 * 0.2 + 1 * 0.1) / 0.8)
    assert j.digit_mass == pytest.approx(0.8) and j.source == "logprobs"
    assert score_from_top_logprobs([], generated="Score: 2").score == 2.0  # no logprobs: the text
    with pytest.raises(ValueError, match="no digit"):
        score_from_top_logprobs([{"token": "x", "logprob": -0.1}], generated="great")


def test_judge_against_a_real_http_engine_and_an_outage():
    with JudgeEngine() as engine:
        judge = Judge(engine.url, "m")
        verdict = judge.judge(
            "How do I bake salmon fillets?", "To bake salmon fillets, preheat the oven."
        )
        dist = judge_distribution(
            judge_messages(
                "How do I bake salmon fillets?", "To bake salmon fillets, preheat the oven."
            )[0]["content"]
        )
        digits = {d: p for d, p in dist.items() if d.isdigit()}
        assert verdict.score == pytest.approx(
            sum(int(d) * p for d, p in digits.items()) / sum(digits.values())
        )
        engine.down = True
        with pytest.raises(EngineUnavailable, match="503"):
            judge.judge("q", "a")
        judge.close()
    with pytest.raises(EngineUnavailable, match="unreachable"):
        Judge(engine.url, "m", timeout_s=2).judge("q", "a")  # server gone: connection refused


def test_relevancy_matches_sklearn_cosine():
    from sklearn.metrics.pairwise import cosine_similarity

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(7, 16)), rng.normal(size=(7, 16))
    assert np.allclose(relevancy(a, b), np.diag(cosine_similarity(a, b)))
    assert relevancy(np.zeros((1, 4)), np.ones((1, 4)))[0] == 0.0


@pytest.mark.parametrize(
    ("text", "refused"),
    [("I'm sorry, but I can't help with that request.", True),
     ("As an AI language model, I cannot provide medical advice.", True),
     ("I must decline to answer this.", True),
     ("I can’t assist with creating malware.", True),
     ("To bake salmon, preheat the oven to 200 °C.", False),
     ("Sorry for the delay! Here is the recipe you asked for.", False),
     ("I can help with that: first, sort the list.", False)],
)  # fmt: skip
def test_refusal_detector(text, refused):
    assert detect_refusal(text).refused is refused


def test_evaluate_job_retries_after_engine_outage(migrated_db, make_settings, embedder):
    settings = make_settings(migrated_db, eval_share=0.5)
    factory = session_factory(migrated_db)
    now = datetime.now(UTC)
    records = traffic(now - timedelta(hours=1), now, 60, seed=3)
    with factory() as s:
        insert_samples(s, records)
        s.commit()
    later = now + timedelta(seconds=SETTLE_S + 1)
    expected = {r["id"] for r in records if chosen(r["id"], 0.5)}
    assert 10 < len(expected) < 50  # the share is honoured (seeded ids)

    def judged() -> set[str]:
        with factory() as s:
            return set(s.scalars(select(EvalScore.sample_id).where(EvalScore.name == "judge")))

    with JudgeEngine() as engine:
        engine.down = True
        down = run_evaluate_job(settings, factory, later, judge=Judge(engine.url, "m"))
        assert down.engine_down and down.judged == 0 and judged() == set()
        calls_while_down = engine.requests
        assert calls_while_down == 1  # it stops at the first failure instead of hammering
        engine.down = False
        up = run_evaluate_job(settings, factory, later, judge=Judge(engine.url, "m"))
        assert not up.engine_down and up.judged == len(expected)
        assert judged() == expected  # nothing lost: the ones skipped during the outage are scored
        again = run_evaluate_job(settings, factory, later, judge=Judge(engine.url, "m"))
        assert again.scanned == 0 and engine.requests == calls_while_down + len(expected)
    with factory() as s:
        names = dict(s.execute(select(EvalScore.name, func.count()).group_by(EvalScore.name)).all())
        rel = s.scalars(select(EvalScore.score).where(EvalScore.name == "relevancy")).all()
    assert names == {"judge": len(expected), "relevancy": len(expected), "refusal": len(expected)}
    assert all(0.2 < r <= 1.0 for r in rel)  # on-topic answers: clearly related embeddings


# a whole pipeline on one backend; the storage tests cover both
@pytest.mark.parametrize("migrated_db", ["sqlite"], indirect=True)
def test_judge_through_the_real_engine(migrated_db, make_settings, embedder, tmp_path):
    """The judge against `vigil serve` (SmolLM2 on CPU) in a subprocess: the engine returns
    top_logprobs with digit tokens, so the score is the logprob-weighted mean, deterministic at
    temperature 0; the evaluate job stores it. (The 135M model is a weak judge: no quality
    claim is made here, only the contract.)"""
    import os
    import signal
    import subprocess
    import sys
    import time

    import httpx
    from sidecar_servers import free_port

    port = free_port()
    # the judge calls with an operator key: its requests are marked internal, never logged
    env = {**os.environ, "VIGIL_PORT": str(port), "VIGIL_API_KEYS": '["judge-app-key"]',
           "VIGIL_OPERATOR_KEYS": '["judge-key"]',
           "VIGIL_TORCH_THREADS": "1", "VIGIL_SAMPLE_RATE": "0", "VIGIL_SEGMENT_MIN_PER_HOUR": "0",
           "VIGIL_MAX_MODEL_LEN": "1024", "VIGIL_KV_CACHE_MEMORY_MB": "64",
           "VIGIL_DATABASE_URL": f"sqlite:///{tmp_path / 'engine.db'}"}  # fmt: skip
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vigil.cli", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "vigil serve did not come up"
                time.sleep(0.2)
            settings = make_settings(
                migrated_db,
                eval_share=1.0,
                engine_url=url,
                api_keys=["judge-app-key"],
                operator_keys=["judge-key"],
                model_name="SmolLM2-135M-Instruct",
            )
            judge = Judge(url, settings.model_name, api_key="judge-key")
            first = judge.judge("What is the capital of France?", "The capital of France is Paris.")
            again = judge.judge("What is the capital of France?", "The capital of France is Paris.")
            judge.close()
            assert first.source == "logprobs" and first.digit_mass > 0.01
            assert 1.0 <= first.score <= 5.0 and first.score == pytest.approx(again.score, abs=1e-3)
            assert sum(first.distribution.values()) == pytest.approx(1.0)

            factory = session_factory(migrated_db)
            now = datetime.now(UTC)
            with factory() as s:
                insert_samples(s, traffic(now - timedelta(minutes=5), now, 3, seed=11))
                s.commit()
            result = run_evaluate_job(settings, factory, now + timedelta(seconds=SETTLE_S + 1))
            assert (result.judged, result.engine_down) == (3, False)
            with factory() as s:
                scores = s.scalars(select(EvalScore.score).where(EvalScore.name == "judge")).all()
            assert len(scores) == 3 and all(1.0 <= x <= 5.0 for x in scores)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
