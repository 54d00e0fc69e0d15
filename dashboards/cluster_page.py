"""`/clusters/{run_id}`: where a window's prompts sit against its baseline — a PCA projection of
both embeddings (inline SVG, no JavaScript), the window's new clusters highlighted, each with
its share and representative prompts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from dashboards.pages import RowId
from dashboards.projection import pca_2d, subsample, svg_scatter
from dashboards.templating import page
from storage.models import DriftResult, DriftRun, Embedding, Sample
from storage.repositories.baselines import load_baseline_embeddings
from storage.repositories.embeddings import fetch_window_embeddings
from storage.types import to_utc

FIELD = "prompt"
PROMPT_CHARS = 200


def cluster_context(session: Session, run_id: int) -> dict[str, Any]:
    run = session.get(DriftRun, run_id)
    if run is None:
        raise HTTPException(404, f"no drift run {run_id}")
    window = f"{to_utc(run.window_start):%Y-%m-%d %H:%M} → {to_utc(run.window_end):%H:%M} UTC"
    context: dict[str, Any] = {
        "run": run,
        "window": window,
        "svg": None,
        "clusters": [],
        "n_window": 0,
        "n_baseline": 0,
        "explained": None,
    }
    model = session.scalar(select(Embedding.model).limit(1))
    if model is None or run.baseline_id is None:
        return context
    win_ids, win = fetch_window_embeddings(session, run.window_start, run.window_end, model, FIELD)
    _, base = load_baseline_embeddings(session, run.baseline_id, FIELD)
    context.update(n_window=len(win_ids), n_baseline=len(base))
    # the drift job's new clusters over all traffic index the window's embedded rows in this order
    result = session.scalars(
        select(DriftResult).where(
            DriftResult.run_id == run_id,
            DriftResult.test == "new_cluster",
            DriftResult.feature == f"{FIELD}_embedding",
            DriftResult.segment == "*",
        )
    ).first()
    groups = (
        ((result.detail or {}).get("clusters") or [])
        if result is not None and result.drifted
        else []
    )
    highlighted: set[int] = set()
    for k, cluster in enumerate(groups):
        reps = [
            i
            for i in cluster.get("representatives") or []
            if isinstance(i, int) and 0 <= i < len(win_ids)
        ]
        highlighted.update(reps)
        ids = [win_ids[i] for i in reps]
        query = select(Sample.id, Sample.prompt).where(Sample.id.in_(ids))
        prompts: dict[str, str | None] = dict(session.execute(query).tuples().all()) if ids else {}
        context["clusters"].append(
            {
                "name": f"new group {k + 1}",
                "size": cluster.get("size"),
                "share": cluster.get("share"),
                "prompts": [(prompts.get(i) or "")[:PROMPT_CHARS] for i in ids],
            }
        )
    if len(win) and len(base) and win.shape[1] == base.shape[1]:
        base_rows, win_rows = subsample(base, seed=run_id), subsample(win, seed=run_id + 1)
        position = {int(original): j for j, original in enumerate(win_rows)}
        base_xy, win_xy, explained = pca_2d(base[base_rows], win[win_rows])
        marked = {position[i] for i in highlighted if i in position}
        context["svg"] = Markup(svg_scatter(base_xy, win_xy, marked))  # built from numbers only
        context["explained"] = [round(float(e) * 100, 1) for e in explained]
    return context


def build_cluster_router(session_factory: sessionmaker[Session]) -> APIRouter:
    router = APIRouter()

    @router.get("/clusters/{run_id}", response_class=HTMLResponse)
    def clusters(run_id: RowId) -> HTMLResponse:
        with session_factory() as session:
            context = cluster_context(session, run_id)
        return page("clusters.html", title=f"Prompt clusters, run {run_id}", **context)

    return router
