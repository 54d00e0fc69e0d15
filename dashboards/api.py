"""`GET /api/v1/series`: the dashboard's chart data as JSON (documented in dashboards/README.md).

Parameters are validated before any query runs: a bad one is a 422 naming it, never a 500.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session, sessionmaker

from dashboards.charts import (
    BUCKETS,
    RANGES,
    bucket_edges,
    drift_charts,
    eval_chart,
    p_value_tests,
    traffic_charts,
)
from storage.repositories.baselines import get_active_baseline, get_baseline
from storage.repositories.series import runs_between
from storage.repositories.series_buckets import (
    eval_bucket_means,
    traffic_buckets,
    worst_results_per_bucket,
)

LABEL = r"^[^\x00-\x1f]{1,128}$"  # a test or feature name: printable, bounded
# a tenant or segment name as storage keeps it: 1-128 characters, any but NUL (the sample record
# refuses NUL, PostgreSQL text cannot hold it); control characters are names too
NAME = r"^[^\x00]{1,128}$"
# the series' `segment`: a segment name, or a drift label `<key>=<name>` (keys up to 14 characters)
SLICE = r"^[^\x00]{1,143}$"


class Kind(StrEnum):
    drift = "drift"
    eval = "eval"
    traffic = "traffic"


class Range(StrEnum):
    day = "24h"
    week = "7d"
    month = "30d"


def series_payload(
    session: Session,
    *,
    kind: str,
    range_: str,
    now: datetime,
    test: str | None = None,
    feature: str | None = None,
    segment: str | None = None,
    tenant: str | None = None,
    baseline_id: int | None = None,
) -> dict[str, Any]:
    """The charts for one kind over one range ending at `now`."""
    start = now - RANGES[range_]
    if baseline_id is None:
        active = get_active_baseline(session)
        baseline_id = active.id if active is not None else None
    elif get_baseline(session, baseline_id) is None:
        raise HTTPException(404, f"no baseline {baseline_id}")
    bucket_s = BUCKETS[range_]
    edges = bucket_edges(start, now, bucket_s)
    origin = float(edges[0]) if len(edges) else start.timestamp()
    body: dict[str, Any] = {
        "kind": kind,
        "range": range_,
        "start": start.timestamp(),
        "end": now.timestamp(),
        "baseline_id": baseline_id,
        "bucket_s": bucket_s,
    }
    if kind == "drift":
        results = worst_results_per_bucket(
            session,
            start,
            now,
            origin,
            bucket_s,
            p_value_tests=p_value_tests(),
            baseline_id=baseline_id,
            test=test,
            feature=feature,
            segment=segment,
        )
        body["charts"] = drift_charts(results, origin, bucket_s)
        return body
    runs = runs_between(session, start, now, baseline_id=baseline_id)
    if kind == "eval":
        body["charts"] = [
            eval_chart(eval_bucket_means(session, start, now, origin, bucket_s), edges, runs)
        ]
    else:
        stats = traffic_buckets(
            session, start, now, origin, bucket_s, len(edges), tenant=tenant, segment=segment
        )
        body["charts"] = traffic_charts(stats, edges, runs)
    return body


def build_api_router(session_factory: sessionmaker[Session]) -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    @router.get("/series")
    def series(
        kind: Kind,
        range: Annotated[Range, Query(description="24h, 7d or 30d, ending now")] = Range.day,
        test: Annotated[str | None, Query(pattern=LABEL)] = None,
        feature: Annotated[str | None, Query(pattern=LABEL)] = None,
        segment: Annotated[str | None, Query(pattern=SLICE)] = None,
        tenant: Annotated[str | None, Query(pattern=NAME)] = None,
        baseline: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    ) -> JSONResponse:
        with session_factory() as session:
            body = series_payload(
                session,
                kind=kind.value,
                range_=range.value,
                now=datetime.now(UTC),
                test=test,
                feature=feature,
                segment=segment,
                tenant=tenant,
                baseline_id=baseline,
            )
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    return router
