"""`build_engine`: an `LLMEngine` ready for users: built, then warmed up when its configuration
asks for it (CUDA, the model in this process). Every front-end that builds an engine calls
this, so the engine's constructor never runs a burst of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

from serving.engine.config import EngineConfig
from serving.engine.core.output_processor import Out, OutputFactory, OutputProcessor
from serving.engine.engine.llm_engine import LLMEngine
from serving.engine.engine.warmup import wants_warm_up, warm_up
from serving.outputs import RequestOutput

if TYPE_CHECKING:
    from serving.engine.engine.runner_setup import ModelInput


@overload
def build_engine(
    config: EngineConfig, loaded: ModelInput | None = None
) -> LLMEngine[RequestOutput]: ...


@overload
def build_engine(
    config: EngineConfig, loaded: ModelInput | None = None, *, output: OutputFactory[Out]
) -> LLMEngine[Out]: ...


def build_engine(
    config: EngineConfig,
    loaded: ModelInput | None = None,
    *,
    output: OutputFactory[Any] = OutputProcessor,
) -> LLMEngine[Any]:
    engine: LLMEngine[Any] = LLMEngine(config, loaded, output=output)
    if wants_warm_up(engine):
        warm_up(engine)  # kernel variants compiled now, not in the first users' steps
    return engine
