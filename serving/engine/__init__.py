"""The paged-KV engine: requests, block manager, scheduler, model runner, LLMEngine,
AsyncLLMEngine."""

from serving.engine.config import EngineConfig
from serving.engine.engine.build import build_engine
from serving.engine.engine.llm_engine import LLMEngine

__all__ = ["EngineConfig", "LLMEngine", "AsyncLLMEngine", "build_engine"]


def __getattr__(name: str):
    if name == "AsyncLLMEngine":  # lazy: keeps `import serving.engine` free of asyncio set-up
        from serving.engine.frontend.async_engine import AsyncLLMEngine

        return AsyncLLMEngine
    raise AttributeError(name)
