"""`vigil check --baseline-cache DIR`: the second check of one reference reads the kept
baseline and answers exactly as the first; a changed reference, seed or window size does not."""

from __future__ import annotations

import argparse
import contextlib
import io
import json

from drift_synth import make_samples, write_jsonl

from vigil.cli.baseline_cache import cache_key
from vigil.cli.check import check_command, run_check


def _check(ref, cur, cache, seed=0):
    args = argparse.Namespace(
        reference=str(ref), current=str(cur), json=True, segment_by=[], seed=seed,
        baseline_cache=str(cache),
    )  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = check_command(args)
    return code, json.loads(out.getvalue())


def test_a_second_check_reuses_the_baseline_and_agrees(tmp_path):
    ref = write_jsonl(make_samples(400, seed=1), tmp_path / "ref.jsonl")
    cur = write_jsonl(
        make_samples(200, seed=2, t0=1.7e9 + 7200, drift="model"), tmp_path / "c.jsonl"
    )
    cache = tmp_path / "cache"
    first = _check(ref, cur, cache)
    assert len(list(cache.glob("*.json"))) == 1
    _, info = run_check(str(ref), str(cur), segment_by=[], seed=0, baseline_cache=str(cache))
    assert info["baseline_cached"]
    second = _check(ref, cur, cache)
    assert first == second and first[0] == 3
    assert not list(cache.glob("*.part"))


def test_the_key_follows_the_file_the_seed_and_the_window(tmp_path):
    ref = write_jsonl(make_samples(60, seed=1), tmp_path / "ref.jsonl")
    key = cache_key(str(ref), seed=0, window_size=100)
    assert key == cache_key(str(ref), seed=0, window_size=100)
    assert key != cache_key(str(ref), seed=1, window_size=100)
    assert key != cache_key(str(ref), seed=0, window_size=101)
    ref.write_text(ref.read_text() + "\n")
    assert key != cache_key(str(ref), seed=0, window_size=100)


def test_an_unreadable_entry_is_rebuilt(tmp_path):
    ref = write_jsonl(make_samples(300, seed=3), tmp_path / "ref.jsonl")
    cur = write_jsonl(make_samples(150, seed=4, t0=1.7e9 + 7200), tmp_path / "c.jsonl")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"{cache_key(str(ref), seed=0, window_size=150)}.json").write_text("{not json")
    _, info = run_check(str(ref), str(cur), segment_by=[], seed=0, baseline_cache=str(cache))
    assert not info["baseline_cached"]
    assert json.loads(next(cache.glob("*.json")).read_text())["baseline"]["n"] == 300
