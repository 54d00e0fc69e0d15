"""A run's cause in one sentence (drift/cause/explain.py), its ranking (drift/cause/ranking.py) and
its prompts' topics (drift/cause/topics.py), on the demo's own traffic and on generated runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from drift.cause import ranking
from drift.cause.explain import explain
from drift.cause.topics import name_topics, strip_shared
from vigil.devtools.demo_traffic import V2_PREAMBLE, drift_event, steady

NOW = datetime(2026, 12, 3, 19, 46, tzinfo=UTC)


def _new(feature, value, count, n):
    return {
        "test": "new_category",
        "feature": feature,
        "segment": "*",
        "drifted": True,
        "insufficient": False,
        "statistic": count / n,
        "p_value": None,
        "threshold": 0.05,
        "detail": {
            "new": [{"value": value, "count": count, "share": count / n, "big": True}],
            "n_current": n,
        },
    }


def _demo_window():
    event = drift_event(NOW - timedelta(minutes=50), NOW, 200)
    hour = steady(NOW - timedelta(minutes=50), NOW, 100, seed=3, tag="hour")
    rows = sorted(event + hour, key=lambda r: r["timestamp"])
    keys = {
        k: [r[k] for r in rows] for k in ("tenant", "segment", "prompt_version", "model_version")
    }
    stamps = [datetime.fromisoformat(r["timestamp"]).timestamp() for r in rows]
    return rows, keys, stamps, event


def test_the_demo_event_in_one_sentence():
    rows, keys, stamps, event = _demo_window()
    n = len(rows)
    results = [
        _new("tenant", "newco", 200, n),
        _new("segment", "mobile", 200, n),
        _new("prompt_version", "v2", 200, n),
        {
            "test": "wasserstein",
            "feature": "tpot_ms",
            "segment": "*",
            "drifted": True,
            "statistic": 63.5,
            "threshold": 1.0,
            "p_value": None,
            "detail": {"n_current": 8},
        },
    ]  # 8 live requests
    proposals = [
        {
            "rule": "new_segment",
            "kind": "persona",
            "segment": "*",
            "evidence": {"results": results[:2]},
        },
        {
            "rule": "latency_psi",
            "kind": "operational",
            "segment": "*",
            "evidence": {"results": results[3:]},
        },
        {
            "rule": "new_prompt_version",
            "kind": "prompt",
            "segment": "*",
            "evidence": {"results": results[2:3]},
        },
    ]
    base = [r["prompt"] for r in steady(NOW - timedelta(hours=26), NOW - timedelta(hours=2), 960)]
    cause = explain(
        results, {"*": {"n_current": n}}, proposals, keys, stamps, [r["prompt"] for r in rows], base
    )
    first = min(datetime.fromisoformat(r["timestamp"]) for r in event)
    assert cause.headline.startswith(
        "New tenant newco (mobile) and prompt version v2 are 67 % of traffic"
        f" since {first:%H:%M} UTC; "
        "their prompts form 5 new topics: "
    )
    names = [t["name"] for t in cause.topics]
    assert sorted(names) == sorted(
        ["helm upgrade", "deployment fails", "kubectl says", "Terraform plan", "CI runner"]
    )
    assert cause.share == 200 / n and cause.attribution == {
        "persona": 1,
        "operational": 1,
        "prompt": 1,
    }
    # the 8-request latency signal, 63.5x its threshold, neither leads nor comes first
    assert cause.worst["test"] == "new_category" and cause.order[-1] == "latency_psi|*"
    assert "279" not in cause.headline and "0.001" not in cause.headline


def test_without_new_values_the_largest_moved_slice_leads():
    results = [
        {
            "test": "psi",
            "feature": "prompt_tokens",
            "segment": "tenant=tiny",
            "drifted": True,
            "statistic": 9.0,
            "threshold": 0.1,
            "p_value": None,
            "detail": {"n_current": 12},
        },
        {
            "test": "mmd",
            "feature": "prompt_embedding",
            "segment": "tenant=acme",
            "drifted": True,
            "statistic": 0.2,
            "threshold": 0.01,
            "p_value": 0.001,
            "detail": {"n_current": 400},
        },
    ]
    sizes = {
        "*": {"n_current": 1000},
        "tenant=tiny": {"n_current": 12},
        "tenant=acme": {"n_current": 400},
    }
    proposals = [
        {
            "rule": "prompt_embedding_mmd",
            "kind": "prompt",
            "segment": "tenant=acme",
            "evidence": {"results": results[1:]},
        },
        {
            "rule": "token_psi",
            "kind": "prompt",
            "segment": "tenant=tiny",
            "evidence": {"results": results[:1]},
        },
    ]
    cause = explain(results, sizes, proposals, {}, [0.0] * 1000)
    assert (
        cause.headline
        == "Prompts moved in tenant acme (40 % of traffic): prompt embedding 1.5× its threshold"
    )
    assert cause.order == ["prompt_embedding_mmd|tenant=acme", "token_psi|tenant=tiny"]


def test_moved_instruction_words_are_named_in_the_headline():
    moved = [
        {"ngram": "article", "baseline_share": 0.28, "window_share": 0.0},
        {"ngram": "french", "baseline_share": 0.2, "window_share": 0.01},
    ]
    result = {
        "test": "instruction_ngrams",
        "feature": "instruction_words",
        "segment": "*",
        "drifted": True,
        "statistic": 6.0,
        "threshold": 0.001,
        "p_value": 0.0005,
        "detail": {"n_current": 300, "moved": moved},
    }
    proposal = {
        "rule": "instruction_words_shift",
        "kind": "prompt",
        "segment": "*",
        "evidence": {"results": [result]},
    }
    cause = explain([result], {"*": {"n_current": 300}}, [proposal], {}, [0.0] * 300)
    assert cause.headline.startswith(
        "Prompts moved across all traffic: “article” in 0 % of prompts, was 28 %"
    ), cause.headline
    assert "threshold" not in cause.headline


def test_shared_preambles_are_not_topics():
    texts = [
        V2_PREAMBLE + p
        for p in ("Why does helm fail?", "Why does kubectl hang?", "Is terraform safe?")
    ]
    assert strip_shared(texts) == [
        "Why does helm fail?",
        "Why does kubectl hang?",
        "Is terraform safe?",
    ]
    assert name_topics([""] * 5) == [] and name_topics(["only one prompt"]) == []


slices = st.lists(
    st.tuples(st.integers(0, 2000), st.floats(1.01, 1e4), st.booleans()), min_size=1, max_size=12
)


@settings(max_examples=300, deadline=None)
@given(slices, st.integers(1, 5000))
def test_worst_never_comes_from_under_the_floor_while_a_larger_slice_moved(spec, window):
    """For any run: the worst result is above the floor whenever any result above it moved."""
    results, sizes = [], {"*": {"n_current": window}}
    for i, (n, effect, p_test) in enumerate(spec):
        label = f"tenant=t{i}"
        sizes[label] = {"n_current": n}
        stat = (
            {
                "statistic": 0.5,
                "p_value": 10 ** -(2 * effect) if p_test else None,
                "threshold": 0.01,
            }
            if p_test
            else {"statistic": effect * 0.1, "p_value": None, "threshold": 0.1}
        )
        results.append(
            {
                "test": "mmd" if p_test else "psi",
                "feature": "f",
                "segment": label,
                "drifted": True,
                "insufficient": False,
                "detail": {"n_current": n},
                **stat,
            }
        )
    lead = ranking.worst(results, sizes)
    above = [r for r in ranking.rank(results, sizes) if r.above_floor]
    if above:
        assert lead.above_floor and lead.n >= ranking.FLOOR_N and lead.share >= ranking.FLOOR_SHARE
        assert lead.score == max(r.score for r in above)
    else:  # only small slices moved: one of them still leads (it is all there is)
        assert lead is not None and not lead.above_floor
