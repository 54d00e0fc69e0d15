"""The drift run's cause for its incident: the window frame's keys, times and prompts handed
to the pure `drift.cause.explain.explain`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy.orm import Session

from storage.models import Incident

log = logging.getLogger("vigil.sidecar.drift")

KEY_COLUMNS = ("tenant", "segment", "prompt_version", "model_version", "finish_reason")


def run_cause(
    results: list[dict[str, Any]],
    sizes: dict[str, dict[str, int]],
    proposed: Sequence[Any],
    frame: pd.DataFrame,
    base_frame: pd.DataFrame | None,
    seed: int,
) -> dict[str, Any] | None:
    """The cause as a dict (headline, order, new values, topics, ...), or None when the run
    proposed nothing. A failure here never loses the run's alerts: they keep their own summaries."""
    from drift.cause.explain import explain

    if not proposed or not len(frame):
        return None
    try:
        keys = {
            c: frame[c].astype(object).where(frame[c].notna(), None).tolist()
            for c in KEY_COLUMNS
            if c in frame
        }
        stamps = (
            pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601").astype("int64") / 1e9
        ).tolist()
        prompts = frame["prompt"].fillna("").astype(str).tolist() if "prompt" in frame else []
        background = (
            base_frame["prompt"].dropna().astype(str).tolist()
            if base_frame is not None and "prompt" in base_frame
            else []
        )
        return explain(
            results, sizes, proposed, keys, stamps, prompts, background, seed=seed
        ).to_dict()
    except Exception:  # the headline is help, not the alert: never fail the window on it
        log.exception(
            "drift run cause could not be built; the incident keeps its lead alert's summary"
        )
        return None


def incident_view(session: Session, fired: Sequence[Any], public_url: str) -> dict[str, Any] | None:
    """The incident the run's alerts joined, as the report shows it (id, headline, severity,
    url)."""
    ids = [a.incident_id for a in fired if getattr(a, "incident_id", None) is not None]
    incident = session.get(Incident, ids[0]) if ids else None
    if incident is None:
        return None
    return {
        "id": incident.id,
        "headline": incident.headline,
        "severity": incident.severity,
        "url": f"{public_url.rstrip('/')}/incidents/{incident.id}",
    }
