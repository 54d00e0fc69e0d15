"""What serves the model: device, weight dtype and attention backend, as the API reports it.

Read from the engine where it runs; the engine-core process sends it in `CoreReady`, so the API
process reports the same fields whichever process holds the model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineIdentity:
    device: str
    dtype: str
    attention: str


UNKNOWN = EngineIdentity("?", "?", "?")


def identify(engine) -> EngineIdentity:
    """An LLMEngine's identity (tensor-parallel runners included: rank 0's)."""
    runner = getattr(engine, "runner", None)
    model = getattr(runner, "model", None)
    dtype = str(next(model.parameters()).dtype) if model is not None else "?"
    attention = getattr(getattr(runner, "backend", None), "name", "?")
    return EngineIdentity(str(getattr(engine, "device", "?")), dtype, str(attention))
