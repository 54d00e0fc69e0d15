"""`vigil check --reference REF.jsonl --current CUR.jsonl [--json] [--segment-by F] [--seed N]
[--baseline-cache DIR]`.

The drift tests offline on two files of logged samples: the reference is built into a baseline,
validated (first half vs second half) and calibrated (window = the current file's size), then
the current file is tested against it, whole and per segment. Embeddings missing from the files
are computed with the offline MiniLM model. Exit 0: no drift; 3: drift; 2: bad input;
4: could not judge (the reference was rejected as a baseline, or most whole-window tests had too
few samples and none found drift), with the reason on stderr. With `--baseline-cache DIR` the
built, validated and calibrated baseline is kept there (vigil.cli.baseline_cache) and reused by
later checks of the same reference file, seed and window size.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np
import pandas as pd

from drift.baseline.build import build_baseline
from drift.baseline.calibrate import calibrate_baseline
from drift.errors import InputError
from drift.outcome import DriftOutcome
from drift.result import ALL
from drift.run import run_drift
from vigil.cli.baseline_cache import cache_key, load_cached, save_cached
from vigil.sample_record import EMBEDDING_FIELDS
from vigil.sample_record.jsonl import RecordFileError, read_records

EXIT_OK, EXIT_BAD_INPUT, EXIT_DRIFT, EXIT_NO_VERDICT = 0, 2, 3, 4
TEXT_FOR = {"prompt_embedding": "prompt", "response_embedding": "response"}


def read_samples(path: str) -> pd.DataFrame:
    """A frame of the file's records, validated by the one record schema (`vigil.sample_record`):
    timestamps as epoch seconds, unknown fields and eval scores as columns, `_line` per row."""
    rows = []
    for line, record in read_records(path):
        # only what the line carried: a default (sample_weight 1) would add a column the file lacks
        row = record.model_dump(exclude_unset=True, exclude_none=True, exclude={"embedding_model"})
        if record.timestamp is not None:
            row["timestamp"] = record.timestamp.timestamp()
        row["_line"] = line
        rows.append(row)
    return pd.DataFrame.from_records(rows)


def _complete(frames: list[pd.DataFrame], field: str) -> bool:
    """Every record of every file carries this embedding, all of one dimension."""
    dims = set()
    for f in frames:
        if field not in f.columns or f[field].isna().any():
            return False
        dims |= {len(v) for v in f[field]}
    return len(dims) == 1


def fill_embeddings(named: dict[str, pd.DataFrame], embed=None) -> list[str]:
    """Compute missing embeddings with MiniLM, in place; returns notes for stderr.

    Vectors from two models are not comparable, so when a field is missing anywhere, every
    record with text gets a MiniLM vector (any provided vectors of that field are replaced)."""
    notes = []
    frames = list(named.values())
    for field in EMBEDDING_FIELDS:
        text = TEXT_FOR[field]
        if _complete(frames, field) or not any(text in f.columns for f in frames):
            continue
        if embed is None:
            from sidecar.embedder import embed_texts as embed
        for path, f in named.items():
            if text not in f.columns:
                continue
            has = f[text].map(lambda v: isinstance(v, str) and v != "")
            if field in f.columns and f[field].notna().any():
                notes.append(f"{path}: {field} given on some records only; recomputed with MiniLM")
            vectors = iter(np.asarray(embed(f.loc[has, text].tolist()), dtype=np.float32))
            f[field] = [next(vectors) if h else None for h in has]
    return notes


def _check_dimensions(named: dict[str, pd.DataFrame]) -> None:
    """Both files' vectors of one field must have one dimension (else MMD is meaningless)."""
    for field in EMBEDDING_FIELDS:
        seen: tuple[str, int, int] | None = None
        for path, f in named.items():
            if field not in f.columns:
                continue
            for line, vec in zip(f["_line"], f[field], strict=True):
                if vec is None or (isinstance(vec, float) and np.isnan(vec)):
                    continue
                if seen is None:
                    seen = (path, int(line), len(vec))
                elif len(vec) != seen[2]:
                    raise InputError(
                        f"{path}:{line}: {field} has {len(vec)} values, "
                        f"{seen[0]}:{seen[1]} has {seen[2]}"
                    )
                break  # read_records already checked the rest of this file against its first


def _check_segment_fields(named: dict[str, pd.DataFrame], fields: list[str]) -> None:
    for field in fields:
        if not any(field in f.columns for f in named.values()):
            raise InputError(f"--segment-by {field}: no record in either file has that field")


def run_check(
    reference: str,
    current: str,
    *,
    segment_by: list[str],
    seed: int,
    embed=None,
    baseline_cache: str | None = None,
) -> tuple[DriftOutcome, dict[str, Any]]:
    ref, cur = read_samples(reference), read_samples(current)
    named = {reference: ref, current: cur}
    _check_segment_fields(named, segment_by)
    _check_dimensions(
        named
    )  # before filling: filling would replace mismatched vectors with MiniLM's
    key = cache_key(reference, seed=seed, window_size=len(cur)) if baseline_cache else None
    cached = load_cached(baseline_cache, key) if baseline_cache and key else None
    # a cached baseline holds the reference's vectors already: only the current file is embedded
    notes = fill_embeddings(named if cached is None else {current: cur}, embed)
    if cached is None:
        baseline, reasons = _fresh_baseline(ref, seed, len(cur))
        if baseline_cache and key:
            save_cached(baseline_cache, key, baseline, reasons)
    else:
        baseline, reasons = cached
    report = run_drift(baseline, cur, segment_by=segment_by, rng_seed=seed)
    info = {
        "n_reference": len(ref),
        "n_current": len(cur),
        "notes": notes,
        "baseline_reasons": reasons,
        "baseline_cached": cached is not None,
    }
    return report, info


def _fresh_baseline(ref: pd.DataFrame, seed: int, window_size: int):
    from drift.baseline.validate import (
        validate_baseline,  # imported late: validate imports baseline
    )

    baseline = build_baseline(ref, seed=seed)
    validation = validate_baseline(baseline)
    calibrate_baseline(baseline, window_size=window_size)
    return baseline, list(validation.reasons)


def no_verdict_reason(report: DriftOutcome, info: dict[str, Any]) -> str | None:
    """Why the result cannot be read as "no drift" or "drift", or None when it can.

    A rejected reference cannot stand for normal traffic, so neither answer holds; when most
    whole-window tests lacked samples, silence means "not tested", though an alert raised by the
    tests that did run still counts as drift."""
    if not report.baseline_valid:
        why = "; ".join(info["baseline_reasons"]) or "validation failed"
        return f"the reference was rejected as a baseline ({why})"
    whole = [r for r in report.results if r.segment == ALL]
    short = sum(r.insufficient for r in whole)
    if not report.drifted and 2 * short > len(whole):
        return (
            f"{short} of {len(whole)} whole-window tests had too few samples "
            f"({info['n_current']} current, {info['n_reference']} reference)"
        )
    return None


def render_text(report: DriftOutcome, info: dict[str, Any], reference: str, current: str) -> str:
    lines = [
        f"reference {reference}: {info['n_reference']} samples, baseline "
        + ("valid" if report.baseline_valid else "REJECTED")
    ]
    lines += [f"  - {r}" for r in info["baseline_reasons"]]
    lines.append(f"current {current}: {info['n_current']} samples")
    if report.insufficient_data:
        lines.append("note: too few samples for some tests (insufficient data, never an alert)")
    drifted = [r for r in report.results if r.drifted]
    lines.append(
        f"{len(report.results)} results, {len(drifted)} drifted, "
        f"{sum(r.insufficient for r in report.results)} insufficient"
    )
    if report.alerts:
        lines.append(f"DRIFT: {len(report.alerts)} alert(s)")
        lines += [f"  [{a.severity}] {a.kind}: {a.summary}" for a in report.alerts]
    elif no_verdict_reason(report, info) is not None:
        lines.append("could not judge (see stderr)")
    else:
        lines.append("no drift")
    return "\n".join(lines)


def check_command(args: argparse.Namespace) -> int:
    try:
        report, info = run_check(
            args.reference,
            args.current,
            segment_by=list(args.segment_by or []),
            seed=int(args.seed),
            baseline_cache=getattr(args, "baseline_cache", None),
        )
    except (InputError, RecordFileError) as exc:
        print(f"vigil check: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for note in info["notes"]:
        print(f"vigil check: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(render_text(report, info, args.reference, args.current))
    reason = no_verdict_reason(report, info)
    if reason is not None:
        print(f"vigil check: could not judge: {reason}", file=sys.stderr)
        return EXIT_NO_VERDICT
    return EXIT_DRIFT if report.drifted else EXIT_OK
