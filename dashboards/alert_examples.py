"""Example prompts behind one alert's own signal, never the window's shared sample: the new
prompt groups its rule fired on (their representatives), the requests holding the new values it
names, or for a length or latency the requests furthest in the direction it moved. A signal with
no such rows (a topic-mix or content test) shows none rather than someone else's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboards.alert_lead import Row
from dashboards.alert_words import centres
from storage.models import DriftRun, Embedding
from storage.repositories.samples import fetch_window

MAX_EXAMPLES = 8
TEXT_LENGTHS = {"prompt_chars": "prompt", "response_chars": "response"}


def _window(session: Session, run: DriftRun, embedded: bool) -> pd.DataFrame:
    model = session.scalar(select(Embedding.model).limit(1)) if embedded else None
    return pd.DataFrame(
        fetch_window(session, run.window_start, run.window_end, embedding_model=model)
    )


def _in_segment(frame: pd.DataFrame, label: str) -> pd.DataFrame:
    from dashboards.report.build import _rows_of_segment

    return frame.iloc[_rows_of_segment(frame, label)]


def _values(frame: pd.DataFrame, feature: str) -> pd.Series | None:
    if feature in TEXT_LENGTHS and TEXT_LENGTHS[feature] in frame.columns:
        return frame[TEXT_LENGTHS[feature]].map(lambda t: len(t) if isinstance(t, str) else np.nan)
    if feature in frame.columns:
        return pd.to_numeric(frame[feature], errors="coerce")
    return None


def _prompts(rows: pd.DataFrame) -> list[str]:
    from dashboards.report.model import truncate

    texts = rows["prompt"] if "prompt" in rows.columns else []
    return [truncate(p, 160) for p in texts if isinstance(p, str)]


def examples_for(session: Session, run: DriftRun, own: Sequence[Row]) -> list[str]:
    """Up to MAX_EXAMPLES prompts behind the alert's own drifted results."""
    moved = [r for r in own if r.drifted]
    if not moved:
        return []
    from dashboards.report.build import cluster_views

    clusters = [r for r in moved if r.test == "new_cluster"]
    frame = _window(session, run, embedded=bool(clusters))
    if not len(frame):
        return []
    out: list[str] = []
    if clusters:
        rows = [{"test": r.test, "feature": r.feature, "segment": r.segment, "drifted": True,
                 "detail": r.detail} for r in clusters]  # fmt: skip
        for view in cluster_views(rows, frame):
            out += view.examples
    for r in moved:
        part = _in_segment(frame, r.segment)
        if r.test == "new_category" and r.feature in part.columns:
            new = {str(v.get("value")) for v in (r.detail or {}).get("new") or []
                   if isinstance(v, dict)}  # fmt: skip
            out += _prompts(part[part[r.feature].astype(str).isin(new)])
        elif (found := centres(r)) is not None and (values := _values(part, r.feature)) is not None:
            rising = found[1] > found[0]
            order = values.sort_values(ascending=not rising, na_position="last").index
            out += _prompts(part.loc[order[:MAX_EXAMPLES]])
    return list(dict.fromkeys(out))[:MAX_EXAMPLES]
