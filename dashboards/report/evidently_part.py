"""Evidently's DataDriftPreset over the window's numeric features vs the baseline.

Both sides are bounded to `max_rows` rows by a seeded sample, so the page costs the same
whatever the traffic (Evidently's HTML is ~4 MB of JS bundle regardless of the data size).

Evidently never sees a name a client chose: its HTML embeds column names raw inside `<script>`
JSON, so eval score columns (named by the sender) reach it as `eval_1`, `eval_2`, ... and
`EvidentlyPart.columns` says which evaluator each stands for, for Vigil's own (escaped) page.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

NUMERIC_FEATURES = (
    "prompt_tokens", "completion_tokens", "ttft_ms", "tpot_ms", "latency_ms", "queue_ms",
    "mean_logprob", "mean_entropy",
)  # fmt: skip
MIN_ROWS = 5  # below this Evidently's tests say nothing useful
MAX_COLUMNS = 14  # each column adds plots (~0.05 MB): 14 at 5000 rows stay ~4.4 MB, under the bound


class EvidentlyVerdict(NamedTuple):
    """What Evidently's "Dataset drift" line stands for: a vote of its per-column tests."""

    drifted: int  # columns its own tests call drifted
    columns: int  # numeric columns compared
    drift_share: float  # the share of drifted columns at which it says "dataset drift"
    rows: int  # rows compared on each side, at most

    @property
    def detected(self) -> bool:
        return self.columns > 0 and self.drifted / self.columns >= self.drift_share


class EvidentlyPart(NamedTuple):
    html: str | None
    why_not: str | None  # why the page is left out, when it is
    verdict: EvidentlyVerdict | None = None
    columns: tuple[tuple[str, str], ...] = ()  # (the name Evidently shows, the column it is)


def neutral_names(columns: list[str]) -> dict[str, str]:
    """Column -> the name Evidently gets: Vigil's own feature names as they are, every other
    column (an eval score a client named) `eval_<n>` in order."""
    others = (c for c in columns if c not in NUMERIC_FEATURES)
    numbered = {column: f"eval_{n}" for n, column in enumerate(others, 1)}
    return {column: numbered.get(column, column) for column in columns}


def preload() -> None:
    """Import Evidently (seconds: a big package) ahead of the first report."""
    import evidently.presets  # noqa: F401 - imported for the load, not a name


def numeric_frame(
    records: list[dict[str, Any]], extra_columns: tuple[str, ...] = ()
) -> pd.DataFrame:
    """Numeric features (and eval_* scores) of sample records as a float frame."""
    columns = list(NUMERIC_FEATURES) + list(extra_columns)
    data = {c: [_num(r.get(c)) for r in records] for c in columns}
    return pd.DataFrame(data, columns=columns, dtype="float64")


def _num(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return np.nan
    return float(value)


def _bounded(frame: pd.DataFrame, max_rows: int, seed: int) -> pd.DataFrame:
    if len(frame) <= max_rows:
        return frame.reset_index(drop=True)
    return frame.sample(n=max_rows, random_state=seed).reset_index(drop=True)


def usable_columns(reference: pd.DataFrame, current: pd.DataFrame) -> list[str]:
    """Columns with enough non-null values on both sides."""
    return [
        c for c in reference.columns
        if c in current.columns
        and reference[c].notna().sum() >= MIN_ROWS and current[c].notna().sum() >= MIN_ROWS
    ]  # fmt: skip


def verdict_of(snapshot_dict: dict[str, Any], columns: int, rows: int) -> EvidentlyVerdict | None:
    """The drifted-columns count behind Evidently's dataset verdict, from its snapshot."""
    for metric in snapshot_dict.get("metrics") or []:
        config = metric.get("config") or {}
        value = metric.get("value")
        if "DriftedColumnsCount" in str(config.get("type", "")) and isinstance(value, dict):
            try:
                return EvidentlyVerdict(
                    int(value["count"]), columns, float(config.get("drift_share", 0.5)), rows
                )
            except (KeyError, TypeError, ValueError):
                return None
    return None


def evidently_html(
    reference: pd.DataFrame, current: pd.DataFrame, *, max_rows: int, seed: int = 0
) -> EvidentlyPart:
    """Evidently's page for the usable numeric columns and what its verdict counted, or why not."""
    columns = usable_columns(reference, current)[:MAX_COLUMNS]
    if not columns:
        return EvidentlyPart(None, "no numeric feature has enough values on both sides")
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    names = neutral_names(columns)
    definition = DataDefinition(numerical_columns=list(names.values()))
    ref = _bounded(reference[columns], max_rows, seed).rename(columns=names)
    cur = _bounded(current[columns], max_rows, seed + 1).rename(columns=names)
    snapshot = Report([DataDriftPreset()]).run(
        Dataset.from_pandas(cur, data_definition=definition),
        Dataset.from_pandas(ref, data_definition=definition),
    )
    verdict = verdict_of(snapshot.dict(), len(columns), max(len(ref), len(cur)))
    legend = tuple((shown, column) for column, shown in names.items() if shown != column)
    return EvidentlyPart(snapshot.get_html_str(as_iframe=False), None, verdict, legend)
