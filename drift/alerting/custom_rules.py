"""The drift job's view of the alert rules table: its drift rules, and overrides from config data.

The table itself (rules, severities, kinds) is `vigil.alert_table`, shared with `alerts/`; this
module only picks the rules that read drift results. `rules_from_dicts` / `merge_rules` build a
custom rule list for `run_drift(rules=...)`: same name replaces a default, and
`"enabled": false` switches one off.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vigil.alert_table import DRIFT_RULES, Rule

DEFAULT_RULES: tuple[Rule, ...] = DRIFT_RULES

__all__ = ["DEFAULT_RULES", "Rule", "merge_rules", "rules_from_dicts"]


def rules_from_dicts(items: Iterable[dict[str, Any]]) -> list[Rule]:
    """Drift rules from config data; ValueError names the rule and the field at fault."""
    out = []
    for i, item in enumerate(items):
        where = f"rule #{i} ({item.get('name', '?')})" if isinstance(item, dict) else f"rule #{i}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object, got {type(item).__name__}")
        for key in ("name", "test", "severity", "kind"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise ValueError(f"{where}: '{key}' must be a non-empty string")
        features = item.get("features", ["*"])
        if isinstance(features, str) or not all(isinstance(f, str) for f in features):
            raise ValueError(f"{where}: 'features' must be a list of strings")
        try:  # the table's Rule checks severity and kind against the one list of each
            out.append(
                Rule(
                    item["name"],
                    item["test"],
                    tuple(features),
                    item["severity"],
                    item["kind"],
                    str(item.get("description", "")),
                    bool(item.get("enabled", True)),
                )
            )
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return out


def merge_rules(defaults: Iterable[Rule], overrides: Iterable[Rule]) -> list[Rule]:
    """Overrides replace defaults of the same name; new names are appended."""
    merged = {r.name: r for r in defaults}
    for r in overrides:
        merged[r.name] = r
    return [r for r in merged.values() if r.enabled]
