"""`vigil check` end to end on synthetic JSONL files (precomputed synthetic embeddings), one run
through the real console script, and one with real MiniLM embeddings computed from text."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from drift_synth import DRIFT_KINDS, make_samples, write_jsonl

from vigil.cli.check import check_command

ROOT = Path(__file__).resolve().parents[2]
# what each drift kind may raise besides itself: a new persona also moves the prompt embeddings
ALSO_ALLOWED = {"persona": {"prompt"}}


def run_check(
    ref: Path, cur: Path, *, seed: int = 0, segment_by=(), as_json=True, baseline_cache=None
):
    args = argparse.Namespace(
        reference=str(ref),
        current=str(cur),
        json=as_json,
        segment_by=list(segment_by),
        seed=seed,
        baseline_cache=None if baseline_cache is None else str(baseline_cache),
    )
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = check_command(args)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("seed", range(20))
def test_null_pair_is_quiet_and_each_drift_kind_raises_its_kind(seed, tmp_path):
    """Per seed: two independent draws of one distribution raise nothing (exit 0); a drifted
    current file (kinds rotate, so each kind gets 4 seeds) raises its kind (exit 3). The second
    check reuses the first's baseline through --baseline-cache, as repeated checks do."""
    cache = tmp_path / "baselines"
    ref = write_jsonl(make_samples(500, seed=10_000 + seed), tmp_path / "ref.jsonl")
    same = write_jsonl(
        make_samples(250, seed=20_000 + seed, t0=1.7e9 + 7200), tmp_path / "same.jsonl"
    )
    code, out, _ = run_check(ref, same, seed=seed, baseline_cache=cache)
    report = json.loads(out)
    assert code == 0 and not report["drifted"] and report["alerts"] == [], report["alerts"]
    assert report["baseline_valid"] and not report["insufficient_data"]

    kind = DRIFT_KINDS[seed % len(DRIFT_KINDS)]
    cur = write_jsonl(
        make_samples(250, seed=30_000 + seed, t0=1.7e9 + 7200, drift=kind), tmp_path / "cur.jsonl"
    )
    code, out, _ = run_check(ref, cur, seed=seed, baseline_cache=cache)
    report = json.loads(out)
    kinds = {a["kind"] for a in report["alerts"]}
    assert code == 3 and report["drifted"] and kind in kinds, (kind, report["alerts"])
    assert kinds <= {kind} | ALSO_ALLOWED.get(kind, set()), (kind, report["alerts"])


def test_json_shape_and_segments(tmp_path):
    ref = write_jsonl(make_samples(500, seed=1), tmp_path / "ref.jsonl")
    cur = write_jsonl(make_samples(250, seed=2, drift="operational"), tmp_path / "cur.jsonl")
    code, out, _ = run_check(ref, cur, segment_by=["tenant"])
    report = json.loads(out)
    assert set(report) == {"drifted", "baseline_valid", "insufficient_data", "alerts", "results"}
    assert set(report["alerts"][0]) == {"severity", "rule", "kind", "segment", "summary"}
    assert set(report["results"][0]) == {
        "test",
        "feature",
        "segment",
        "statistic",
        "p_value",
        "threshold",
        "drifted",
    }
    segments = {r["segment"] for r in report["results"]}
    assert {"*", "tenant=acme", "tenant=globex"} <= segments
    assert any(
        a["segment"] == "tenant=acme" and a["kind"] == "operational" for a in report["alerts"]
    )


def test_tiny_window_is_insufficient_not_drift(tmp_path):
    """Too few samples is never an alert, and never "no drift" either: exit 4."""
    ref = write_jsonl(make_samples(500, seed=3), tmp_path / "ref.jsonl")
    cur = write_jsonl(make_samples(12, seed=4, drift="prompt"), tmp_path / "cur.jsonl")
    code, out, err = run_check(ref, cur)
    report = json.loads(out)
    assert code == 4 and report["insufficient_data"] and not report["alerts"]
    assert "could not judge" in err


@pytest.mark.parametrize(
    "content,needle",
    [
        ('{"prompt": "hi"}\nnot json\n', ":2: not valid JSON"),
        (
            '{"prompt": "hi"}\n{"prompt": "x", "latency_ms": "fast"}\n',
            ":2: latency_ms: Input should be a valid number",
        ),
        ("[1, 2]\n", ":1: record: a sample record is a JSON object"),
        (
            '{"prompt": "a", "prompt_embedding": [1, 2]}\n'
            '{"prompt": "b", "prompt_embedding": [1]}\n',
            ":2: prompt_embedding has 1 values, line 1 had 2",
        ),
        ('{"response": "no prompt"}\n', ":1: record: a sample needs 'prompt' or 'prompt_tokens'"),
        (
            '{"prompt": "a", "timestamp": "yesterday"}\n',
            ":1: timestamp: 'yesterday' is not an RFC 3339",
        ),
        ("\n\n", ": no records"),
    ],
)
def test_bad_input_exits_2_naming_file_and_line(tmp_path, content, needle):
    good = write_jsonl(make_samples(100, seed=5), tmp_path / "good.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    code, out, err = run_check(good, bad)
    assert code == 2 and out == ""
    assert f"{bad}{needle}" in err, err


def test_missing_file_and_unknown_segment_field(tmp_path):
    good = write_jsonl(make_samples(100, seed=6), tmp_path / "good.jsonl")
    code, _, err = run_check(good, tmp_path / "nope.jsonl")
    assert code == 2 and "nope.jsonl: no such file" in err
    code, _, err = run_check(good, good, segment_by=["region"])
    assert code == 2 and "--segment-by region" in err


def test_console_script_text_output(tmp_path):
    ref = write_jsonl(make_samples(500, seed=7), tmp_path / "ref.jsonl")
    cur = write_jsonl(make_samples(250, seed=8, drift="eval"), tmp_path / "cur.jsonl")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    vigil = ROOT / ".venv" / "bin" / "vigil"
    cmd = [str(vigil)] if vigil.exists() else [sys.executable, "-m", "vigil.cli"]
    proc = subprocess.run(
        [*cmd, "check", "--reference", str(ref), "--current", str(cur)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 3, proc.stderr
    assert "baseline valid" in proc.stdout and "[critical] eval:" in proc.stdout


COOKING = [
    "How do I bake {} bread at home?",
    "What is a good recipe for {} soup?",
    "How long should I roast {} in the oven?",
    "Can I use {} instead of butter in cookies?",
]
CARS = [
    "Why does my car's {} make a grinding noise?",
    "How often should I replace the {} on a sedan?",
    "What does the {} warning light on the dashboard mean?",
    "How much does a new {} cost for a truck?",
]
FOOD = ["garlic", "pumpkin", "sourdough", "tomato", "chicken", "lentil", "olive oil", "banana"]
PARTS = ["brake pad", "timing belt", "alternator", "oil filter", "spark plug", "transmission"]


def _texts(rng, templates, words, n):
    return [rng.choice(templates).format(rng.choice(words)) for _ in range(n)]


def test_real_minilm_embeddings_computed_when_absent(tmp_path):
    """Files with text but no embeddings: MiniLM embeds them offline and MMD sees the topic
    change; the vectors match a plain transformers mean-pooling of the same model."""
    rng = np.random.default_rng(9)
    ref, cur = tmp_path / "ref.jsonl", tmp_path / "cur.jsonl"
    ref.write_text(
        "".join(json.dumps({"prompt": t}) + "\n" for t in _texts(rng, COOKING, FOOD, 120))
    )
    cur.write_text(
        "".join(
            json.dumps({"prompt": t}) + "\n"
            for t in _texts(rng, COOKING, FOOD, 20) + _texts(rng, CARS, PARTS, 40)
        )
    )
    code, out, _ = run_check(ref, cur)
    report = json.loads(out)
    mmd = [r for r in report["results"] if r["test"] == "mmd" and r["segment"] == "*"]
    assert [r["feature"] for r in mmd] == ["prompt_embedding"]
    assert mmd[0]["drifted"] and code == 3
    assert any(a["rule"] == "prompt_embedding_mmd" for a in report["alerts"])

    import torch
    from transformers import AutoModel, AutoTokenizer

    from sidecar.embedder import DIM, default_model_path, embed_texts

    texts = ["How do I bake bread?", "Why does my brake pad squeal?", "hello"]
    ours = embed_texts(texts)
    tok = AutoTokenizer.from_pretrained(default_model_path())
    model = AutoModel.from_pretrained(default_model_path()).eval()
    batch = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    ref_vecs = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    assert ours.shape == (3, DIM)
    assert np.allclose(ours, ref_vecs, atol=1e-4)


def test_embedding_dimensions_must_agree_across_files(tmp_path):
    ref = tmp_path / "ref.jsonl"
    cur = tmp_path / "cur.jsonl"
    ref.write_text(
        "".join(
            json.dumps({"prompt_tokens": 5, "prompt_embedding": [0.1, 0.2, 0.3]}) + "\n"
            for _ in range(30)
        )
    )
    cur.write_text(
        "".join(
            json.dumps({"prompt_tokens": 5, "prompt_embedding": [0.1, 0.2]}) + "\n"
            for _ in range(30)
        )
    )
    code, _, err = run_check(ref, cur)
    assert code == 2 and f"{cur}:1: prompt_embedding has 2 values, {ref}:1 has 3" in err, err
