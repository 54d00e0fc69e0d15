"""The eval trend's input for the drift job: the trailing week of eval scores, one row per
sample, read from storage under a sample cap."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
from sqlalchemy.orm import Session

from storage.repositories.eval_scores import load_eval_scores

EVAL_TREND_DAYS = 7


def trailing_eval_frame(session: Session, end: datetime, max_samples: int) -> pd.DataFrame:
    """Trailing EVAL_TREND_DAYS of eval scores, one row per sample (eval_<name> columns); at
    most `max_samples` samples, an even sample in time beyond that (a busy week holds millions)."""
    rows = load_eval_scores(
        session, end - timedelta(days=EVAL_TREND_DAYS), end, max_samples=max_samples
    )
    if not rows:
        return pd.DataFrame()
    long = pd.DataFrame([{"id": r.sample_id, "name": f"eval_{r.name}", "score": r.score,
                          "timestamp": r.timestamp.timestamp(), "segment": r.segment,
                          "tenant": r.tenant} for r in rows])  # fmt: skip
    wide = long.pivot_table(index=["id", "timestamp"], columns="name", values="score").reset_index()
    keys = long.drop_duplicates("id").set_index("id")[["segment", "tenant"]]
    return wide.join(keys, on="id")
