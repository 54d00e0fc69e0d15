"""`EngineClientDouble`: the whole `EngineClient` surface with do-nothing answers, for test
engines that script only what a test needs (`generate`, say). The server calls the surface
without asking what a double offers, so every double offers all of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from serving.engine.frontend.identity import UNKNOWN, EngineIdentity
from serving.outputs import EngineStats, RequestOutput
from serving.sampling_params import SamplingParams


class EngineClientDouble:
    coalesces_outputs = False  # the server drains the stream itself, newest output kept
    tokenizer: Any = None
    max_model_len = 512
    is_running = True

    def start(self) -> None:
        pass

    def identity(self) -> EngineIdentity:
        return UNKNOWN

    def validate_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        pass

    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prompt: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        return
        yield  # an async generator that yields nothing

    def abort(self, request_id: str) -> None:
        pass

    def stats(self) -> EngineStats:
        return EngineStats()

    def num_waiting(self) -> int:
        return 0

    def num_running(self) -> int:
        return 0

    def add_health_listener(self, listener: Callable[[bool], None]) -> None:
        pass

    def remove_health_listener(self, listener: Callable[[bool], None]) -> None:
        pass

    async def wait_idle(self, poll_s: float = 0.01) -> None:
        pass

    async def drain(self, timeout: float) -> bool:
        return True

    async def shutdown(self) -> None:
        pass
