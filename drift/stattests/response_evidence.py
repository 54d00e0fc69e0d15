"""The responses' evidence summed over windows (drift.streams.window_evidence): a stream, written by
run_drift when it is handed the state; described here so pages and reasons read it alike."""

from __future__ import annotations

from drift.result import TestResult
from drift.spec import TestSpec, not_run, register
from drift.streams.window_evidence import NAME, since_words


def _phrase(r: TestResult, words: str, traffic: str) -> str:
    return f"{words}: a small change in every window, {since_words(r.detail)}"


SPEC = register(
    TestSpec(
        name=NAME,
        kind="embedding",
        direction="statistic",
        own_rule=True,  # its detector combines several limits
        default_threshold=0.0,
        min_samples=1,
        phrase=_phrase,
        func=not_run,
        per_feature=False,
        scope="emitted",
        description="CUSUM of the response test's evidence z over recent windows",
        display_name="the response evidence",
        unit="summed evidence (z)",
    )
)
