"""Silences, as Alertmanager users know them: label matchers (rule, severity, tenant, segment,
feature; shell-style globs, every one given must match) with a start, an expiry, a creator and a
comment. While an active silence matches every open member an incident counts, the incident is
not notified; it still shows on every page, marked as silenced. Functions take the caller's
session and never commit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import Alert, Silence
from storage.types import to_utc

LABELS = ("rule", "severity", "tenant", "segment", "feature")
MAX_PATTERN = 256
MAX_COMMENT = 2000
MAX_DURATION = timedelta(days=90)


class SilenceError(ValueError):
    """A silence that cannot be made: the message names the field at fault."""


def alert_labels(alert: Alert) -> dict[str, list[str]]:
    """Each label's values for one alert: a segment label `tenant=acme` gives tenant `acme` and
    segment `tenant=acme`; features come from the drift results in its evidence."""
    evidence = alert.evidence if isinstance(alert.evidence, Mapping) else {}
    results = [r for r in evidence.get("results") or [] if isinstance(r, Mapping)]
    features = {str(r["feature"]) for r in results if r.get("feature")}
    if evidence.get("feature"):
        features.add(str(evidence["feature"]))
    key, sep, name = alert.segment.partition("=")
    tenants = [name] if sep and key == "tenant" else []
    for r in results:
        if r.get("feature") == "tenant":
            new = (r.get("detail") or {}).get("new") or []
            tenants += [str(v.get("value")) for v in new if isinstance(v, Mapping)]
    return {"rule": [alert.rule], "severity": [alert.severity], "segment": [alert.segment],
            "tenant": tenants, "feature": sorted(features)}  # fmt: skip


def matches(matchers: Mapping[str, str], alert: Alert) -> bool:
    labels = alert_labels(alert)
    return all(
        any(fnmatchcase(value, str(pattern)) for value in labels.get(label, []))
        for label, pattern in matchers.items()
    )


def active(session: Session, now: datetime) -> list[Silence]:
    return list(
        session.scalars(
            select(Silence)
            .where(Silence.starts_at <= now, Silence.ends_at > now)
            .order_by(Silence.id)
        )
    )


def silencing(silences: Iterable[Silence], alerts: list[Alert]) -> Silence | None:
    """The first silence that matches every one of `alerts` (None when there are none)."""
    if not alerts:
        return None
    return next((s for s in silences if all(matches(s.matchers, a) for a in alerts)), None)


def _matchers(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise SilenceError("matchers: expected an object of label -> pattern")
    out = {}
    for label, pattern in raw.items():
        if label not in LABELS:
            known = ", ".join(LABELS)
            raise SilenceError(f"matchers.{str(label)[:40]}: unknown label; use {known}")
        if pattern in (None, ""):
            continue  # a form's empty field: any value
        if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN or "\x00" in pattern:
            raise SilenceError(f"matchers.{label}: a pattern of 1-{MAX_PATTERN} characters")
        out[label] = pattern
    if not out:
        raise SilenceError("matchers: give at least one label, or the silence would mute all")
    return out


def create(
    session: Session,
    *,
    matchers: Any,
    ends_at: datetime,
    created_by: str,
    comment: str,
    now: datetime,
    starts_at: datetime | None = None,
) -> Silence:
    starts = to_utc(starts_at) if starts_at is not None else now
    ends = to_utc(ends_at)
    if ends <= max(starts, now):
        raise SilenceError("ends_at: must be after its start and in the future")
    if ends - starts > MAX_DURATION:
        raise SilenceError(f"ends_at: a silence lasts at most {MAX_DURATION.days} days")
    comment = (comment or "").strip()
    if not comment or len(comment) > MAX_COMMENT:
        raise SilenceError(f"comment: say why (1-{MAX_COMMENT} characters)")
    row = Silence(matchers=_matchers(matchers), starts_at=starts, ends_at=ends,
                  created_by=created_by[:128], comment=comment, created_at=now)  # fmt: skip
    session.add(row)
    session.flush()
    return row


def expire(session: Session, silence_id: int, now: datetime) -> Silence:
    row = session.get(Silence, silence_id)
    if row is None:
        raise LookupError(f"silence {silence_id} does not exist")
    if to_utc(row.ends_at) > now:
        row.ends_at = now
    return row
