"""`/segments/{tenant}/{segment}`: one slice of traffic — its drift signals (the drift job
labels slices `tenant=...` and `segment=...`), its open alerts, its volume and latency, and its
latest prompts. `-` stands for "any" in either place."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import HTMLResponse
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from dashboards.api import LABEL, Range
from dashboards.templating import page
from storage.models import Alert, Sample

ANY = "-"
MAX_PROMPTS = 20
PROMPT_CHARS = 200


def segment_href(label: str) -> str | None:
    """The drill-down page of a drift segment label ("tenant=acme", "segment=web"), if any."""
    key, _, value = label.partition("=")
    if not value:
        return None
    if key == "tenant":
        return f"/segments/{quote(value, safe='')}/{ANY}"
    if key == "segment":
        return f"/segments/{ANY}/{quote(value, safe='')}"
    return None


def segment_context(session: Session, tenant: str | None, segment: str | None, range_: str) -> dict:
    labels = [f"tenant={tenant}"] if tenant else []
    labels += [f"segment={segment}"] if segment else []
    charts = [("drift " + label, "/api/v1/series?" + urlencode({"kind": "drift", "range": range_, "segment": label}))
              for label in labels]
    traffic = {"kind": "traffic", "range": range_}
    if tenant:
        traffic["tenant"] = tenant
    if segment:
        traffic["segment"] = segment
    charts.append(("traffic and latency", "/api/v1/series?" + urlencode(traffic)))
    alerts = list(session.scalars(select(Alert).where(Alert.status == "open", Alert.segment.in_(labels))
                                  .order_by(Alert.last_seen.desc()).limit(50))) if labels else []
    query = select(Sample.timestamp, Sample.tenant, Sample.segment, Sample.prompt)
    if tenant:
        query = query.where(Sample.tenant == tenant)
    if segment:
        query = query.where(Sample.segment == segment)
    prompts = [{"at": ts, "tenant": t, "segment": s, "prompt": (p or "")[:PROMPT_CHARS]}
               for ts, t, s, p in session.execute(query.order_by(Sample.timestamp.desc()).limit(MAX_PROMPTS))]
    return {"charts": charts, "alerts": alerts, "prompts": prompts, "labels": labels}


def build_segment_router(session_factory: sessionmaker[Session]) -> APIRouter:
    router = APIRouter()

    @router.get("/segments/{tenant}/{segment}", response_class=HTMLResponse)
    def segment_page(tenant: Annotated[str, Path(pattern=LABEL)], segment: Annotated[str, Path(pattern=LABEL)],
                     range: Range = Range.week) -> HTMLResponse:
        t, s = (None if tenant == ANY else tenant), (None if segment == ANY else segment)
        if t is None and s is None:
            raise HTTPException(404, "name a tenant or a segment (use - for any)")
        with session_factory() as session:
            context = segment_context(session, t, s, range.value)
        title = " / ".join(x for x in (f"tenant {t}" if t else "", f"segment {s}" if s else "") if x)
        return page("segment.html", title=title, range=range.value, ranges=[r.value for r in Range],
                    here=f"/segments/{quote(tenant, safe='')}/{quote(segment, safe='')}", **context)

    return router
