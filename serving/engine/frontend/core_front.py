"""`CoreClientFront`: the part of the `EngineClient` surface a core front-end answers from its
`CoreRequests` and health listeners, forwarded. `EngineCoreClient` and `AttachedCoreClient` each
hold their own `CoreRequests` (composition: neither reaches into the other) and add how their
core starts, stops and dies."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from serving.engine.frontend.core_requests import CoreRequests
from serving.engine.frontend.identity import EngineIdentity
from serving.engine.frontend.output_slot import read_slot
from serving.engine.frontend.supervisor import HealthListeners
from serving.outputs import EngineStats, RequestOutput
from serving.sampling_params import SamplingParams


class CoreClientFront:
    """The `EngineClient` methods a core front-end answers from its `CoreRequests`."""

    coalesces_outputs = True  # a slow reader gets the newest output, never a queue
    session: CoreRequests
    health: HealthListeners

    @property
    def tokenizer(self) -> Any:
        return self.session.tokenizer

    @property
    def max_model_len(self) -> int:
        return self.session.max_model_len

    @property
    def vocab_size(self) -> int:
        return self.session.vocab_size

    @property
    def device(self) -> str:
        return self.session.device

    @property
    def is_running(self) -> bool:
        return self.session.is_running

    def identity(self) -> EngineIdentity:
        """Device, dtype and attention backend, as the core reported them when it was ready."""
        return self.session.identity

    def validate_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        self.session.validate_request(request_id, prompt_token_ids, params)

    async def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prompt: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        live = self.session.submit(request_id, prompt_token_ids, params, prompt)
        # closed with this generator, so a reader that goes away aborts at once
        async with contextlib.aclosing(
            read_slot(live.slot, lambda: self.abort(request_id))
        ) as outputs:
            async for out in outputs:
                yield out

    def abort(self, request_id: str) -> None:
        self.session.abort(request_id)

    def stats(self) -> EngineStats:
        return self.session.mirror.stats()

    def num_waiting(self) -> int:
        return self.session.mirror.num_waiting()

    def num_running(self) -> int:
        return self.session.mirror.num_running()

    def add_health_listener(self, listener: Callable[[bool], None]) -> None:
        """`listener(False)` when the core dies, `listener(True)` when a new one is ready."""
        self.health.append(listener)

    def remove_health_listener(self, listener: Callable[[bool], None]) -> None:
        if listener in self.health:
            self.health.remove(listener)

    async def wait_idle(self, poll_s: float = 0.01) -> None:
        await self.session.wait_idle(poll_s)

    async def drain(self, timeout: float) -> bool:
        return await self.session.drain(timeout)
