"""`vigil check --baseline-cache DIR`: the built, validated and calibrated baseline of a
reference file, kept for repeated checks against it.

The key is the SHA-256 of the reference file's bytes, the seed, the calibration window size
(the current file's row count), the baseline format and the drift code's package version, so a
changed file, setting or release never reads a stale entry. An entry is one JSON file
(`Baseline.to_dict()` with its features, and the validation's reasons), written to a temporary
name and renamed, so a crash or a concurrent check never leaves half an entry; an unreadable
entry is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from drift.baseline.build import FORMAT_VERSION, Baseline


def _code_version() -> str:
    try:
        return version("vigil")
    except PackageNotFoundError:
        return "unknown"


def cache_key(reference: str, *, seed: int, window_size: int) -> str:
    digest = hashlib.sha256()
    with open(reference, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    settings = json.dumps(
        {"seed": seed, "window": window_size, "format": FORMAT_VERSION, "code": _code_version()},
        sort_keys=True,
    )
    digest.update(settings.encode())
    return digest.hexdigest()


def load_cached(directory: str, key: str) -> tuple[Baseline, list[str]] | None:
    path = Path(directory) / f"{key}.json"
    if not path.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return Baseline.from_dict(data["baseline"]), list(data["reasons"])
    except (ValueError, KeyError, TypeError):
        return None


def save_cached(directory: str, key: str, baseline: Baseline, reasons: list[str]) -> None:
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"baseline": baseline.to_dict(), "reasons": reasons})
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
    with os.fdopen(fd, "w") as f:
        f.write(body)
    os.replace(tmp, folder / f"{key}.json")
