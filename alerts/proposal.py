"""The one input shape of the alerts package: a proposed alert.

The drift job hands over `ProposedAlert(severity, rule, kind, segment, summary, evidence)`
objects; `alerts` does not import `drift` (arrows point one way), so anything with those
attributes — or a dict with those keys — is accepted and normalised into `Proposal`. Severities
and kinds are those of the one rules table, `vigil.alert_table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vigil.alert_table import KINDS, SEVERITIES, SEVERITY_RANK
from vigil.sample_record.limits import MAX_SEGMENT_LABEL_CHARS

__all__ = [
    "ALL_SEGMENTS",
    "KINDS",
    "SEVERITIES",
    "SEVERITY_RANK",
    "Proposal",
    "ProposalError",
    "coerce_proposal",
]

ALL_SEGMENTS = "*"


class ProposalError(ValueError):
    """A proposed alert is malformed; the message names the field and the offending value."""


@dataclass(frozen=True)
class Proposal:
    severity: str
    rule: str
    kind: str
    segment: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def coerce_proposal(obj: Any, index: int | None = None) -> Proposal:
    """Normalise a ProposedAlert-like object or dict; raise ProposalError naming what is wrong."""
    where = f"proposed alert #{index}" if index is not None else "proposed alert"
    severity = _get(obj, "severity")
    if severity not in SEVERITY_RANK:
        raise ProposalError(f"{where}: severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    kind = _get(obj, "kind")
    if kind not in KINDS:
        raise ProposalError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    rule = _get(obj, "rule")
    if not isinstance(rule, str) or not rule.strip():
        raise ProposalError(f"{where}: rule must be a non-empty string, got {rule!r}")
    if len(rule) > 64:
        raise ProposalError(f"{where}: rule {rule[:20]!r}... is longer than 64 characters")
    segment = _get(obj, "segment") or ALL_SEGMENTS
    if not isinstance(segment, str) or len(segment) > MAX_SEGMENT_LABEL_CHARS:
        raise ProposalError(
            f"{where}: segment must be a string of at most {MAX_SEGMENT_LABEL_CHARS} characters"
        )
    summary = _get(obj, "summary") or f"{rule} fired on segment {segment}"
    evidence = _get(obj, "evidence") or {}
    if not isinstance(evidence, Mapping):
        raise ProposalError(f"{where}: evidence must be a mapping, got {type(evidence).__name__}")
    return Proposal(
        severity=severity,
        rule=rule.strip(),
        kind=kind,
        segment=segment,
        summary=str(summary),
        evidence=_jsonable(dict(evidence)),
    )


def _jsonable(value: Any) -> Any:
    """Evidence goes into a JSON column and webhook bodies: turn numpy scalars/arrays, tuples and
    other stragglers into plain JSON values (NaN/inf become None: JSON has no spelling for them)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return _jsonable(value.tolist())
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)
