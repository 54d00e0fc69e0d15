"""Drift quality on public data: does the drift run catch a silent template rewording and a
quiet model swap, name the cause, and stay quiet when nothing changed?

    .venv/bin/python -m bench.suites.bench_drift_quality [--windows 20] [--window-size 50] \
        [--base 200] [--held 80] [--reworded 30] [--device cpu] \
        [--before var/drift_quality/summary-<commit>.json] [--pool-only]

Five applications serve BIG-bench tasks (PyPI sdist `bigbench==1.0.0`) through four prompt
templates each (bench/workloads/drift_quality_apps.py); SmolLM2-135M-Instruct answers on the
project's engine, and a sibling fine-tune of it answers the model-swap windows
(bench/targets/sibling_model.py).
Records carry what the traffic logger records (tenant = the application), embeddings are the
offline MiniLM of `vigil check`. The baseline is built, validated and calibrated for the window
size as the product does; every window then goes through `run_drift` with the drift job's
default segmentation. Rates per window kind: detected (any alert), the cause named (every alert
that names a side names the planted one) and, for unchanged windows, false alarms. The summary
is kept under var/ by commit; `--before` puts an earlier run's rates beside this one's.

Scale: generation dominates (about 0.1 responses/s on two shared CPU cores), so the defaults are
the smallest pool that still calibrates (a 200-sample baseline gives four 50-sample chunks);
windows are seeded draws from their pool part, so their count costs no generation. With a GPU
(`--device cuda`) raise --base/--held/--reworded and --window-size (e.g. 3000/1200/600/300).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common.results_table import Table, _commit, write_results
from bench.workloads.bigbench_tasks import fetch_sdist, read_tasks
from bench.workloads.drift_quality_apps import task_app
from bench.workloads.drift_quality_pool import Generator, generate_part, part_prompts
from bench.workloads.drift_quality_windows import EXPECTED_CAUSE, KINDS, draw_window, score, wilson

ROOT = Path(__file__).resolve().parents[2]
# VIGIL_DRIFT_QUALITY_CACHE lets another checkout (an older drift/) reuse one generated pool
CACHE = Path(os.environ.get("VIGIL_DRIFT_QUALITY_CACHE") or ROOT / "var" / "drift_quality")
SDIST_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vigil-bench"
RECORD_FIELDS = (
    "prompt",
    "response",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
    "mean_logprob",
    "mean_entropy",
)


def build_pool(args: argparse.Namespace) -> dict[str, list[dict]]:
    from bench.targets.sibling_model import sibling_model
    from serving.loader import default_model_path, load_model_files

    tasks = read_tasks(fetch_sdist(SDIST_CACHE), set(task_app()))
    sizes = {"base": args.base, "held": args.held, "reworded": args.reworded}
    prompts = part_prompts(tasks, sizes)
    models: dict = {}  # loaded only when a part still needs generating

    def loaded():
        if not models:
            models["served"] = load_model_files(default_model_path())
        return models["served"]

    served = lambda: Generator(loaded(), args.threads, args.device)  # noqa: E731
    parts = {}
    wanted = args.only or ("held", "base", "reworded", *(["sibling"] * ("model" in args.kinds)))
    for name, seed in (("held", 2_000_000), ("base", 1_000_000), ("reworded", 3_000_000)):
        if name in wanted:
            parts[name] = generate_part(CACHE / f"pool-{name}.jsonl", prompts[name], served, seed)
    sibling = lambda: Generator(  # noqa: E731
        sibling_model(loaded(), tasks, CACHE), args.threads, args.device
    )
    if "sibling" in wanted:
        parts["sibling"] = generate_part(
            CACHE / "pool-sibling.jsonl", prompts["held"], sibling, 2_000_000
        )
    return parts


def embedded(name: str, rows: list[dict]) -> pd.DataFrame:
    """The part as sample records, with MiniLM prompt/response embeddings (cached)."""
    from sidecar.embedder import embed_texts

    frame = pd.DataFrame(rows)
    path = CACHE / f"emb-{name}-{len(frame)}.npz"
    if path.is_file():
        cached = np.load(path)
        prompt_vecs, response_vecs = cached["prompt"], cached["response"]
    else:
        t0 = time.perf_counter()
        prompt_vecs = embed_texts(frame["prompt"].tolist())
        response_vecs = embed_texts(frame["response"].tolist())
        np.savez(path, prompt=prompt_vecs, response=response_vecs)
        print(f"  embedded {name}: {len(frame)} x 2 texts in {time.perf_counter() - t0:.0f} s")
    out = frame[["app", "template", "reworded", *RECORD_FIELDS]].copy()
    out["tenant"] = out.pop("app")
    out["prompt_embedding"] = list(prompt_vecs)
    out["response_embedding"] = list(response_vecs)
    return out


def run_windows(parts: dict[str, pd.DataFrame], args: argparse.Namespace) -> dict:
    from drift.baseline.build import build_baseline
    from drift.baseline.calibrate import calibrate_baseline
    from drift.baseline.validate import validate_baseline
    from drift.run import run_drift

    base = parts["base"].copy()
    base["timestamp"] = np.arange(len(base), dtype=np.float64)
    t0 = time.perf_counter()
    baseline = build_baseline(base.drop(columns=["template", "reworded"]), seed=args.seed)
    validation = validate_baseline(baseline)
    calibrate_baseline(baseline, window_size=args.window_size)
    setup_s = time.perf_counter() - t0
    print(f"baseline {len(base)}: valid={baseline.valid} {validation.reasons} ({setup_s:.0f} s)")
    per_kind: dict[str, list[dict]] = {k: [] for k in args.kinds}
    run_s = []
    for i in range(args.windows):
        for kind in args.kinds:
            w = draw_window(kind, i, parts, args.window_size, args.seed)
            t1 = time.perf_counter()
            outcome = run_drift(
                baseline, w.frame.drop(columns=["template", "reworded"]), rng_seed=args.seed + i
            )
            run_s.append(time.perf_counter() - t1)
            s = score(outcome)
            per_kind[kind].append(
                {
                    "detected": s.detected,
                    "causes": list(s.causes),
                    "named": bool(EXPECTED_CAUSE[kind] and s.named(EXPECTED_CAUSE[kind])),
                    "changed": list(w.changed),
                    "alerts": [a.summary for a in outcome.alerts][:6],
                    "results": sum(not r.insufficient for r in outcome.results),
                    "drifted_results": sum(
                        r.drifted and not r.insufficient for r in outcome.results
                    ),
                }
            )
            print(
                f"  {kind:8s} #{i:02d} {'DRIFT' if s.detected else 'quiet':5s} "
                f"causes={','.join(s.causes) or '-'} {' '.join(w.changed)} ({run_s[-1]:.1f} s)",
                flush=True,
            )
    return {
        "commit": _commit(),
        "baseline": len(base),
        "baseline_valid": bool(baseline.valid),
        "window_size": args.window_size,
        "setup_s": setup_s,
        "run_s_median": float(np.median(run_s)),
        "windows": per_kind,
    }


def merged(paths: list[Path]) -> dict:
    """One summary from runs of the same commit over different window kinds."""
    out: dict = {}
    for path in paths:
        part = json.loads(path.read_text())
        windows = {**out.get("windows", {}), **part["windows"]}
        out = {**part, **out, "windows": windows}
    return out


def rates(summary: dict) -> dict[str, tuple[int, int]]:
    """(hits, windows) per outcome; outcomes of window kinds the run did not have are left out."""
    w = summary["windows"]

    def count(kind: str, key: str) -> tuple[int, int] | None:
        return (sum(r[key] for r in w[kind]), len(w[kind])) if kind in w else None

    out = {
        "template_detected": count("template", "detected"),
        "template_prompt": count("template", "named"),
        "model_detected": count("model", "detected"),
        "model_model": count("model", "named"),
        "none_alarm": count("none", "detected"),
    }
    if "none" in w:
        out["none_results"] = (
            sum(r["drifted_results"] for r in w["none"]),
            sum(r["results"] for r in w["none"]),
        )
    return {k: v for k, v in out.items() if v is not None}


LABELS = {
    "template_detected": "(a) silent template rewording: detected",
    "template_prompt": "(a) silent template rewording: cause named `prompt`",
    "model_detected": "(b) sibling model swap: detected",
    "model_model": "(b) sibling model swap: cause named `model`",
    "none_alarm": "(c) nothing changed: false alarms (windows with an alert)",
    "none_results": "(c) nothing changed: drifted test results (calibrated at about 1 % each)",
}


def fmt(hits: tuple[int, int] | None) -> str:
    if hits is None:
        return "not run"
    k, n = hits
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.0%} [{lo:.0%}, {hi:.0%}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=20, help="windows of each kind")
    ap.add_argument("--window-size", type=int, default=50)
    ap.add_argument("--base", type=int, default=200, help="baseline samples")
    ap.add_argument("--held", type=int, default=80, help="window-input prompts per model")
    ap.add_argument("--reworded", type=int, default=30, help="reworded-template prompts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="the engine's device for generation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--before", type=Path, nargs="+", help="earlier runs' summary JSON (the before column)"
    )
    ap.add_argument(
        "--from-summary", type=Path, nargs="+", help="write the tables of these runs' summaries"
    )
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--pool-only", action="store_true", help="generate and embed the pool only")
    ap.add_argument(
        "--only",
        nargs="+",
        choices=("held", "base", "reworded", "sibling"),
        help=(
            "generate these pool parts only (implies --pool-only): parts can be made in "
            "parallel processes"
        ),
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    pool = build_pool(args)
    parts = {name: embedded(name, rows) for name, rows in pool.items()}
    print(
        f"pool ready in {time.perf_counter() - t0:.0f} s: "
        + ", ".join(f"{k} {len(v)}" for k, v in parts.items())
    )
    if args.pool_only or args.only:
        return
    if args.from_summary:  # tables from earlier runs of this pool, nothing rerun
        path = args.from_summary[0]
        summary = merged(args.from_summary)
    else:
        summary = run_windows(parts, args)
        tag = "" if tuple(args.kinds) == KINDS else "-" + "-".join(args.kinds)
        path = CACHE / f"summary-{summary['commit']}{tag}.json"
        path.write_text(json.dumps(summary, indent=1))
    now = rates(summary)
    before = rates(merged(args.before)) if args.before else None
    columns = ["window kind: outcome", "rate [95% Wilson]"]
    if before:
        columns = ["window kind: outcome", "before", "after"]
    table = Table(
        f"{args.windows} windows of {args.window_size} per kind against a {len(parts['base'])}-"
        "sample calibrated baseline (tenant = application)",
        columns,
    )
    for key, label in LABELS.items():
        if key in now or (before and key in before):
            cells = ([fmt(before.get(key))] if before else []) + [fmt(now.get(key))]
            print(table.add(label, *cells))
    from bench.targets import sibling_model as sib
    from bench.workloads.drift_quality_pool import MAX_TOKENS, TEMPERATURE

    notes = [
        "data: BIG-bench (PyPI sdist bigbench==1.0.0) qa_wikidata, arithmetic 2-digit addition "
        "and subtraction, date_understanding, intent_recognition, sports_understanding; 5 "
        "applications x 4 prompt templates, 5 of them with a silent rewording; baseline and "
        "windows on disjoint task inputs",
        f"pool: baseline {len(parts['base'])}, window prompts {len(parts['held'])} per model, "
        f"reworded {len(parts['reworded'])}; SmolLM2-135M-Instruct (GGUF) on the engine, "
        f"temperature {TEMPERATURE}, at most {MAX_TOKENS} new tokens",
        f"sibling: the same model with its last {sib.LAYERS} blocks and final norm fine-tuned "
        f"{sib.STEPS} AdamW steps (batch {sib.BATCH}, lr {sib.LR}) on BIG-bench reference answers "
        "in a terse 'Answer: ...' style; no model_version change",
        "detected = any alert; cause named = every alert naming a side (prompt/model/unclear) "
        "names the planted one; brackets: 95% Wilson intervals",
        f"summary: var/drift_quality/{path.name}; run_drift median {summary['run_s_median']:.1f} s "
        f"per window, baseline build + validate + calibrate {summary['setup_s']:.0f} s",
    ]
    for kind in ("template", "model"):
        missed = [
            " + ".join(r["changed"]) or "-"
            for r in summary["windows"].get(kind, [])
            if not r["detected"]
        ]
        if missed:
            notes.append(f"after, {kind} windows missed: {'; '.join(missed)}")
    wrong = sorted(
        {
            ",".join(r["causes"])
            for r in summary["windows"].get("template", [])
            if r["detected"] and not r["named"]
        }
    )
    if wrong:
        notes.append(f"after, template windows detected with other causes: {'; '.join(wrong)}")
    if before:
        notes.append(f"before: commit {merged(args.before)['commit']}, after: {summary['commit']}")
    write_results("drift_quality", [table], notes)


if __name__ == "__main__":
    main()
