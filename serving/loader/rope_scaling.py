"""A config's rope scaling as one dict (HF's two spellings read alike) and as the hashable
tuple a `RopeSpec` carries."""

from __future__ import annotations

from typing import Any


def frozen_scaling(scaling: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in scaling.items()))


def normalize_rope_scaling(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    """HF spells it `rope_scaling` (v4) or `rope_parameters` (v5), with `type` or `rope_type`."""
    if not raw:
        return None
    scaling = {k: v for k, v in raw.items() if k not in ("type", "rope_theta")}
    kind = raw.get("rope_type", raw.get("type", "default"))
    if kind == "default":
        return None
    scaling["rope_type"] = kind
    return scaling
