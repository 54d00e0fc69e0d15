"""The drift-quality benchmark's prompts and windows: disjoint inputs, planted changes only."""

from __future__ import annotations

import pandas as pd
from scipy.stats import binomtest

from bench.workloads.bigbench_tasks import Example
from bench.workloads.drift_quality_apps import all_templates, reworded_templates, task_app
from bench.workloads.drift_quality_pool import draw_prompts, split_of
from bench.workloads.drift_quality_windows import Score, draw_window, wilson


def _tasks(n: int = 60) -> dict[str, list[Example]]:
    return {
        task: [Example(task, f"{task} input {i}", "a") for i in range(n)] for task in task_app()
    }


def test_baseline_and_window_prompts_use_disjoint_inputs():
    tasks = _tasks()
    base = draw_prompts(tasks, 300, split=0, seed=1)
    held = draw_prompts(tasks, 300, split=1, seed=2)
    assert not {r["input"] for r in base} & {r["input"] for r in held}
    assert {split_of(r["input"]) for r in base} == {0}
    assert {split_of(r["input"]) for r in held} == {1}
    assert all(r["input"] in r["prompt"] for r in base + held)


def test_prompts_are_prefix_stable_and_follow_the_traffic_shares():
    tasks = _tasks()
    long = draw_prompts(tasks, 2000, split=0, seed=5)
    assert draw_prompts(tasks, 50, split=0, seed=5) == long[:50]
    share = sum(t.share for t in all_templates() if t.name == "qa/1")
    hits = sum(r["template"] == "qa/1" for r in long)
    assert binomtest(hits, len(long), share).pvalue > 1e-4


def _part(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)[["prompt", "template", "reworded", "app"]]


def test_a_template_window_rewords_only_the_chosen_templates():
    tasks = _tasks()
    parts = {
        "held": _part(draw_prompts(tasks, 400, split=1, seed=2)),
        "reworded": pd.concat(
            [
                _part(draw_prompts(tasks, 80, split=1, seed=3, templates=[t], reworded=True))
                for t in reworded_templates()
            ],
            ignore_index=True,
        ),
    }
    parts["sibling"] = parts["held"]
    w = draw_window("template", 0, parts, 200, seed=0)
    assert 2 <= len(w.changed) <= 3
    changed = w.frame["template"].isin(w.changed)
    assert w.frame.loc[changed, "reworded"].all()
    assert not w.frame.loc[~changed, "reworded"].any()
    assert set(w.frame.loc[~changed, "prompt"]) <= set(parts["held"]["prompt"])
    same = draw_window("none", 0, parts, 200, seed=0)
    assert not same.changed and not same.frame["reworded"].any()


def test_the_cause_is_named_only_when_every_side_alert_agrees():
    assert Score(True, ("prompt",), 1).named("prompt")
    assert not Score(True, ("model", "prompt"), 2).named("prompt")
    assert not Score(True, ("unclear",), 1).named("model")
    assert Score(True, ("eval", "model"), 2).named("model")
    assert not Score(False, (), 0).named("prompt")


def test_wilson_interval_brackets_the_rate():
    lo, hi = wilson(18, 20)
    assert lo < 0.9 < hi and 0.68 < lo < 0.70
    assert wilson(0, 20)[0] == 0.0 and wilson(20, 20)[1] == 1.0
