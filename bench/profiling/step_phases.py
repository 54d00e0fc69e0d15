"""Host time per engine step, split by phase: each phase function is wrapped with a timer for
the duration of a `StepPhases` block (profiling aid for bench/profiling/profile_staggered.py).

A phase nested in another (the step inputs inside the launch) is counted in both; the table
reports each phase's mean microseconds per step and the step's wall time."""

from __future__ import annotations

import time
from collections import defaultdict

import torch

from serving.engine.worker import runner as runner_module
from serving.engine.worker.input_batch import InputBatch


class StepPhases:
    def __init__(self, engine):
        runner = engine.runner
        # (owner, attribute, phase name): owner is an instance, a class or a module
        self.targets = [
            (engine.scheduler, "schedule", "schedule"),
            (runner, "launch", "launch (all)"),
            (InputBatch, "build", "  step inputs"),
            (runner.gpu, "forward", "  forward enqueue"),
            (runner.model, "compute_logits", "  logits enqueue"),
            (runner_module, "sample_rows", "  sampler enqueue"),
            (runner_module.InflightStep, "__init__", "  readback copy enqueue"),
            (runner_module.InflightStep, "results", "read back (all)"),
            (torch.cuda.Event, "synchronize", "  wait for the device"),
            (engine, "_emit", "outputs"),
            (engine.scheduler, "update_after_step", "scheduler update"),
        ]
        self.totals: dict[str, float] = defaultdict(float)
        self._saved: list[tuple[object, str, object, bool]] = []

    def __enter__(self) -> StepPhases:
        for owner, attr, name in self.targets:
            if owner is None:  # no GPU forward on the CPU
                continue
            own = attr in vars(owner)
            original = getattr(owner, attr)
            self._saved.append((owner, attr, vars(owner).get(attr, original), own))
            setattr(owner, attr, self._timed(original, name, bound=not isinstance(owner, type)))
        return self

    def _timed(self, fn, name: str, bound: bool):
        totals = self.totals

        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                totals[name] += time.perf_counter() - t0

        return timed

    def __exit__(self, *exc) -> None:
        for owner, attr, original, own in reversed(self._saved):
            if own:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)
        self._saved.clear()

    def per_step_us(self, steps: int) -> dict[str, float]:
        return {
            name: 1e6 * self.totals[name] / steps
            for owner, _, name in self.targets
            if owner is not None
        }
