"""Windows of the drift-quality benchmark, drawn from the pool, and how a drift run scores.

- `none`: window inputs on the usual templates, the served model (nothing changed);
- `template`: the same, except that 2–3 templates that have a rewording are silently reworded
  (every window row of such a template is replaced by a reworded row of the same template);
- `model`: the `held` prompts answered by the sibling model (a quiet swap, no model_version).

Each window is a seeded draw without replacement from its pool part; windows of one kind may
share rows with each other, never with the baseline (disjoint inputs, drift_quality_pool).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.workloads.drift_quality_apps import reworded_templates

KINDS = ("template", "model", "none")
EXPECTED_CAUSE = {"template": "prompt", "model": "model", "none": None}
ATTRIBUTED = ("prompt", "model")


@dataclass
class Window:
    kind: str
    index: int
    frame: pd.DataFrame
    changed: tuple[str, ...] = ()  # reworded template names


def draw_window(
    kind: str, index: int, parts: dict[str, pd.DataFrame], size: int, seed: int
) -> Window:
    rng = np.random.default_rng([seed, KINDS.index(kind), index])
    source = parts["sibling"] if kind == "model" else parts["held"]
    rows = source.iloc[rng.choice(len(source), size, replace=False)].reset_index(drop=True)
    changed: tuple[str, ...] = ()
    if kind == "template":
        names = [t.name for t in reworded_templates()]
        count = int(rng.integers(2, 4))
        changed = tuple(sorted(str(x) for x in rng.choice(names, count, replace=False)))
        rew = parts["reworded"]
        for name in changed:
            at = np.flatnonzero(rows["template"].to_numpy() == name)
            pool = np.flatnonzero(rew["template"].to_numpy() == name)
            take = rng.choice(pool, min(at.size, pool.size), replace=False)
            rows.iloc[at[: take.size]] = rew.iloc[take].to_numpy()
    rows["timestamp"] = np.arange(len(rows), dtype=np.float64)
    return Window(kind, index, rows, changed)


@dataclass
class Score:
    detected: bool
    causes: tuple[str, ...]  # kinds of the alerts that name a side (prompt / model / other)
    alerts: int

    def named(self, cause: str) -> bool:
        """Detected, and every alert that names a side names `cause`."""
        sides = [c for c in self.causes if c in ATTRIBUTED or c == "unclear"]
        return self.detected and bool(sides) and all(c == cause for c in sides)


def score(outcome) -> Score:
    kinds = tuple(sorted({a.kind for a in outcome.alerts}))
    return Score(bool(outcome.alerts), kinds, len(outcome.alerts))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return float(max(0.0, mid - half)), float(min(1.0, mid + half))
