"""The canary tables through storage.repositories.canaries, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from storage.db import session_factory
from storage.models import CanaryBaseline
from storage.repositories.canaries import (
    CanaryResultRow,
    activate_canary_baseline,
    add_canary_results,
    finish_canary_run,
    get_active_canary_baseline,
    get_canary_results,
    list_canary_runs,
    start_canary_run,
)

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def _baseline(session, version: str, now: datetime) -> CanaryBaseline:
    return activate_canary_baseline(
        session, probe_set_version=version, model_version="m1", engine={"device": "cpu"},
        expected={"p": {"token_ids": [1, 2], "logprobs": [-0.1, -0.2], "perplexity": None}},
        tolerances={"p": {"logprob_delta_max": 1e-3}}, calibration={"p": {"runs": 4}}, now=now,
    )  # fmt: skip


def test_one_active_baseline_and_runs_with_results_round_trip(migrated_db):
    factory = session_factory(migrated_db)
    with factory() as s:
        assert get_active_canary_baseline(s) is None
        first = _baseline(s, "v1", NOW)
        second = _baseline(s, "v2", NOW + timedelta(minutes=1))
        s.commit()
        active = get_active_canary_baseline(s)
        assert active.id == second.id and active.probe_set_version == "v2"
        assert s.get(CanaryBaseline, first.id).status == "retired"
        run = start_canary_run(
            s, baseline_id=second.id, model_version="m1", engine={"device": "cpu"}, now=NOW
        )
        rows = [
            CanaryResultRow(
                "p", [1, 3], "ab" * 32, [-0.1, -2.0], None, {"first_divergence": 1}, False
            ),
            CanaryResultRow("ppl", [5, 6, 7], "cd" * 32, [-1.5, -0.5, -1.0], 2.718, None, True),
        ]
        assert add_canary_results(s, run.id, rows) == 2
        finish_canary_run(s, run, status="mismatch", summary={"failed": ["p"]}, now=NOW)
        s.commit()
    with factory() as s:
        (stored,) = list_canary_runs(s)
        assert stored.status == "mismatch" and stored.summary == {"failed": ["p"]}
        assert stored.started_at == NOW and stored.finished_at == NOW
        results = get_canary_results(s, stored.id)
        assert [(r.probe, r.token_ids, r.ok) for r in results] == [
            ("p", [1, 3], False),
            ("ppl", [5, 6, 7], True),
        ]
        assert results[1].perplexity == pytest.approx(2.718)
        assert results[0].comparison == {"first_divergence": 1}
        with pytest.raises(ValueError):
            finish_canary_run(s, stored, status="weird", summary=None, now=NOW)
