"""The segment page: one slice of traffic — its drift signals (the drift job labels slices
`tenant=...` and `segment=...`), the open incidents and alerts that involve it
(dashboards/segment_incidents.py, dashboards/segment_alerts.py: filed under it, a result in it,
or naming it as a new value), its volume and latency, and its
latest prompts.

Links name the slice in the query (`/segments?tenant=a%2Fb&segment=web`): a path parameter
cannot carry every name, since servers and proxies decode %2F to `/` before routing. The short
form `/segments/{tenant}/{segment}` (`-` for "any") still serves names without `/`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Path, Query
from fastapi.responses import HTMLResponse
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from dashboards.api import NAME, Range
from dashboards.segment_alerts import chart_keys, involved_alerts
from dashboards.segment_incidents import involved_incidents
from dashboards.templating import page, visible
from storage.models import Sample

ANY = "-"
MAX_PROMPTS = 20
PROMPT_CHARS = 200
_NAME = re.compile(NAME)


def segment_url(tenant: str | None, segment: str | None, range_: str | None = None) -> str:
    """The segment page of a slice (None: any tenant / any segment); every text round-trips."""
    params = [
        (k, v)
        for k, v in (("tenant", tenant), ("segment", segment), ("range", range_))
        if v is not None
    ]
    return "/segments?" + urlencode(params, quote_via=quote)


def segment_href(label: str) -> str | None:
    """The drill-down page of a drift segment label ("tenant=acme", "segment=web"), if any: not
    for other keys, nor for a value storage cannot hold (empty, NUL, over 128 characters).
    Control characters are percent-encoded like any other."""
    key, _, value = label.partition("=")
    if key not in ("tenant", "segment") or not _NAME.fullmatch(value):
        return None
    return segment_url(value, None) if key == "tenant" else segment_url(None, value)


def segment_context(
    session: Session, tenant: str | None, segment: str | None, range_: str
) -> dict[str, Any]:
    labels = [f"tenant={tenant}"] if tenant else []
    labels += [f"segment={segment}"] if segment else []
    charts = [
        (
            "drift " + visible(label),
            "/api/v1/series?" + urlencode({"kind": "drift", "range": range_, "segment": label}),
        )
        for label in labels
    ]
    traffic = {"kind": "traffic", "range": range_}
    if tenant:
        traffic["tenant"] = tenant
    if segment:
        traffic["segment"] = segment
    slices = [(k, v) for k, v in (("tenant", tenant), ("segment", segment)) if v]
    involved = involved_alerts(session, slices)
    incidents = involved_incidents(session, slices, involved)
    for test, feature, label in chart_keys(involved, labels):
        where = "all traffic" if label == "*" else visible(label)
        charts.append(
            (
                f"{test} · {feature} ({where}), from an alert that involves it",
                "/api/v1/series?"
                + urlencode(
                    {
                        "kind": "drift",
                        "range": range_,
                        "test": test,
                        "feature": feature,
                        "segment": label,
                    }
                ),
            )
        )
    charts.append(("traffic and latency", "/api/v1/series?" + urlencode(traffic)))
    query = select(Sample.timestamp, Sample.tenant, Sample.segment, Sample.prompt)
    if tenant:
        query = query.where(Sample.tenant == tenant)
    if segment:
        query = query.where(Sample.segment == segment)
    prompts = [
        {"at": ts, "tenant": t, "segment": s, "prompt": (p or "")[:PROMPT_CHARS]}
        for ts, t, s, p in session.execute(
            query.order_by(Sample.timestamp.desc()).limit(MAX_PROMPTS)
        )
    ]
    return {
        "charts": charts,
        "alerts": involved,
        "incidents": incidents,
        "prompts": prompts,
        "labels": labels,
    }


def _segment_page(
    session_factory: sessionmaker[Session], tenant: str | None, segment: str | None, range_: str
) -> HTMLResponse:
    if tenant is None and segment is None:
        raise HTTPException(404, "name a tenant or a segment")
    with session_factory() as session:
        context = segment_context(session, tenant, segment, range_)
    names = (
        (f"tenant {visible(tenant)}" if tenant else ""),
        (f"segment {visible(segment)}" if segment else ""),
    )
    title = " / ".join(x for x in names if x)
    return page(
        "segment.html",
        title=title,
        range=range_,
        ranges=[(r.value, segment_url(tenant, segment, r.value)) for r in Range],
        **context,
    )


def build_segment_router(session_factory: sessionmaker[Session]) -> APIRouter:
    router = APIRouter()

    @router.get("/segments", response_class=HTMLResponse)
    def segment_by_query(
        tenant: Annotated[str | None, Query(pattern=NAME)] = None,
        segment: Annotated[str | None, Query(pattern=NAME)] = None,
        range: Range = Range.week,
    ) -> HTMLResponse:
        return _segment_page(session_factory, tenant, segment, range.value)

    @router.get("/segments/{tenant}/{segment}", response_class=HTMLResponse)
    def segment_by_path(
        tenant: Annotated[str, Path(pattern=NAME)],
        segment: Annotated[str, Path(pattern=NAME)],
        range: Range = Range.week,
    ) -> HTMLResponse:
        return _segment_page(
            session_factory,
            None if tenant == ANY else tenant,
            None if segment == ANY else segment,
            range.value,
        )

    return router
