"""`/baselines`: each baseline's window, size, status and validation verdict, thresholds, the
smallest change each test detects at the window size (drift.baseline.power), the judge's measured
validity, and age; build, validate and activate from the page (admin key; building and
validating run as background jobs whose state the page lists). The operations
themselves are the sidecar's (`sidecar.jobs.baselines`), handed in as `BaselineOps` so this package
does not import it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session, sessionmaker

from dashboards.baseline_jobs import BaselineJobs
from dashboards.refused import refused
from dashboards.templating import page
from drift.baseline.power_report import PowerReport
from drift.baseline.power_words import power_lines, summary_lines
from storage.repositories.baselines import list_baselines
from storage.types import to_utc

MAX_FORM = 4096


@dataclass(frozen=True)
class BaselineOps:
    """build(start, end, now) -> id; validate(id, now) -> (valid, reasons); activate(id, now)."""

    build: Callable[[datetime, datetime, datetime], int]
    validate: Callable[[int, datetime], tuple[bool, list[str]]]
    activate: Callable[[int, datetime], None]


def _thresholds(spec: dict[str, Any] | None) -> list[tuple[str, str, float]]:
    out = []
    for test, by_feature in sorted(((spec or {}).get("thresholds") or {}).items()):
        if isinstance(by_feature, dict):
            out += [
                (test, feature, value)
                for feature, value in sorted(by_feature.items())
                if isinstance(value, int | float)
            ]
    return out


def _power(spec: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(one sentence per feature, every test's sentence) from the stored power report; nothing
    when the baseline has none (built before power was measured, or not validated)."""
    data = (spec or {}).get("power")
    if not isinstance(data, dict):
        return [], []
    try:
        report = PowerReport.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return [], []
    return summary_lines(report), power_lines(report)


def judge_validity(model: str, auc: float | None) -> str:
    """What the eval scores are worth, in words: the judge's measured AUC, or that it is not."""
    if auc is None:
        return (
            f"Eval scores: the judge ({model}) has no measured validity; "
            "bench/suites/bench_judge_validity.py measures it (VIGIL_JUDGE_AUC shows it here)."
        )
    return (
        f"Eval scores: the judge ({model}) tells right from wrong math answers with ROC AUC "
        f"{auc:.2f} (0.5 = chance, 1 = always), measured by bench/suites/bench_judge_validity.py."
    )


def baseline_rows(session: Session, now: datetime) -> list[dict[str, Any]]:
    rows = []
    for b in list_baselines(session)[:200]:
        validation = b.validation or {}
        reasons = validation.get("reasons") or []
        rows.append(
            {
                "id": b.id,
                "name": b.name,
                "status": b.status,
                "num_samples": b.num_samples,
                "window": f"{to_utc(b.window_start):%Y-%m-%d %H:%M} → "
                f"{to_utc(b.window_end):%Y-%m-%d %H:%M}",
                "age_s": (now - to_utc(b.created_at)).total_seconds(),
                "verdict": ("valid" if validation.get("valid") else "rejected")
                if validation
                else "not validated",
                "reasons": [str(r) for r in reasons][:5],
                "thresholds": _thresholds(b.spec),
                "power": _power(b.spec),
            }
        )
    return rows


def _parse_time(value: str, field: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(422, f"{field}: not an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _baseline_id(value: str) -> int:
    try:
        baseline_id = int(value)
    except ValueError:
        raise HTTPException(422, "id: a baseline id") from None
    if not 1 <= baseline_id < 2**31:  # no row has it (and the database cannot hold it)
        raise HTTPException(404, f"no baseline {baseline_id}")
    return baseline_id


def _validated(ops: BaselineOps, baseline_id: int) -> str:
    valid, reasons = ops.validate(baseline_id, datetime.now(UTC))
    return f"baseline {baseline_id}: " + ("valid" if valid else "rejected: " + "; ".join(reasons))


def build_baselines_router(
    session_factory: sessionmaker[Session],
    viewer: Callable[..., Any],
    ops: BaselineOps | None,
    judge_note: str | None = None,
    jobs: BaselineJobs | None = None,
) -> APIRouter:
    """Building and validating run as background jobs (`jobs`, one worker thread): the page
    answers at once and lists each job's state."""
    router = APIRouter()
    jobs = jobs or BaselineJobs()

    @router.get("/baselines", response_class=HTMLResponse)
    def baselines(message: str | None = None) -> HTMLResponse:
        with session_factory() as session:
            rows = baseline_rows(session, datetime.now(UTC))
        return page(
            "baselines.html",
            title="Baselines",
            baselines=rows,
            actions=ops is not None,
            message=(message or "")[:300],
            judge_note=judge_note,
            jobs=jobs.latest(),
        )

    @router.post("/baselines/{action}")
    async def act(action: str, request: Request, principal: Any = Depends(viewer)) -> Response:
        if not getattr(principal, "admin", False):
            words = {"build": "building", "validate": "validating", "activate": "activating"}.get(
                action, action
            )
            return refused(f"{words} a baseline", principal, "/baselines")
        if ops is None:
            raise HTTPException(503, "baseline actions are not available in this process")
        raw = await request.body()
        if len(raw) > MAX_FORM:
            raise HTTPException(413, "form too large")
        form = {
            k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), max_num_fields=4).items()
        }
        if action == "build":
            start, end = (
                _parse_time(form.get("start", ""), "start"),
                _parse_time(form.get("end", ""), "end"),
            )
            job = jobs.submit(
                f"build a baseline from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC",
                lambda: f"built baseline {ops.build(start, end, datetime.now(UTC))} (candidate)",
            )
            message = f"job {job.id} started: {job.what} (its state shows below)"
        elif action in ("validate", "activate"):
            baseline_id = _baseline_id(form.get("id", ""))
            if action == "validate":
                job = jobs.submit(
                    f"validate baseline {baseline_id}", lambda: _validated(ops, baseline_id)
                )
                message = f"job {job.id} started: {job.what} (its state shows below)"
            else:
                try:  # one short transaction, off the event loop
                    await asyncio.to_thread(ops.activate, baseline_id, datetime.now(UTC))
                    message = f"baseline {baseline_id} is active"
                except (ValueError, LookupError) as exc:  # BaselineError is a ValueError
                    message = f"{action} refused: {exc}"
        else:
            raise HTTPException(404, f"unknown action {action!r}")
        return RedirectResponse("/baselines?message=" + quote(message[:300]), status_code=303)

    return router
