"""The rules file's `escalation` section, per route (severity):

    escalation:
      critical: {repeat_interval_s: 3600, after_s: 1800, to: [manager]}

`repeat_interval_s` (Alertmanager's repeat_interval): an unacknowledged incident's trigger is
sent again to the targets that heard it this often; `after_s` and `to`: once it has been
unacknowledged this long, `to` is paged too (once). Both stop when it is acknowledged, snoozed,
silenced, marked expected or resolved (`alerts/escalation.py`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from alerts.routing import Escalation
from vigil.alert_table import SEVERITIES

KEYS = {"repeat_interval_s", "after_s", "to"}
MIN_S = 60


def parse_escalation(
    raw: Any, known: set[str], fail: Callable[[str, str], Exception], names: Callable[..., Any]
) -> dict[str, Escalation]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise fail("escalation", "expected a mapping of severity -> {repeat_interval_s, ...}")
    out = {}
    for severity, spec in raw.items():
        where = f"escalation.{severity}"
        if severity not in SEVERITIES:
            raise fail(where, f"unknown severity; use one of {', '.join(SEVERITIES)}")
        if not isinstance(spec, Mapping) or set(spec) - KEYS:
            raise fail(where, f"expected a mapping with keys from {', '.join(sorted(KEYS))}")
        seconds = {}
        for key in ("repeat_interval_s", "after_s"):
            value = spec.get(key)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < MIN_S
            ):
                raise fail(f"{where}.{key}", f"whole seconds, at least {MIN_S}")
            seconds[key] = value
        to = names(spec["to"], known, f"{where}.to", fail) if spec.get("to") else ()
        if to and seconds["after_s"] is None:
            raise fail(where, "`to` needs `after_s` (how long unacknowledged before it pages)")
        out[str(severity)] = Escalation(seconds["repeat_interval_s"], seconds["after_s"], to)
    return out
