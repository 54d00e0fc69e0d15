"""`EngineClient`: the one surface the API server drives, whichever front-end runs the engine.

Three front-ends implement it: `AsyncLLMEngine` (the engine in a thread of this process,
`VIGIL_ENGINE_PROCESS=inprocess`), `EngineCoreClient` (the engine core in a child process this
client starts and supervises, the default) and `AttachedCoreClient` (one of several API
processes feeding a core their parent owns). Their stats come from one `StatsMirror`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from serving.engine.frontend.identity import EngineIdentity
from serving.outputs import EngineStats, RequestOutput
from serving.sampling_params import SamplingParams


@runtime_checkable
class EngineClient(Protocol):
    # a slow reader gets the newest output with the missed deltas folded in, never a queue
    coalesces_outputs: bool

    @property
    def tokenizer(self) -> Any: ...

    @property
    def max_model_len(self) -> int: ...

    @property
    def is_running(self) -> bool: ...

    def start(self) -> None:
        """Load the model (or wait for the core to); blocking: call off the event loop."""

    def identity(self) -> EngineIdentity: ...

    def validate_request(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> None:
        """Raise ValueError naming the problem; pure, so any thread may call it."""

    def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prompt: str | None = None,
    ) -> AsyncIterator[RequestOutput]:
        """Stream the request's outputs until the finished one."""
        ...

    def abort(self, request_id: str) -> None:
        """Thread-safe; the request's stream ends with a finish_reason 'abort' output."""

    def stats(self) -> EngineStats: ...

    def num_waiting(self) -> int: ...

    def num_running(self) -> int: ...

    def add_health_listener(self, listener: Callable[[bool], None]) -> None:
        """`listener(False)` when the engine goes down, `listener(True)` when it is back."""

    def remove_health_listener(self, listener: Callable[[bool], None]) -> None: ...

    async def wait_idle(self, poll_s: float = 0.01) -> None:
        """Return once no request is queued or running."""

    async def drain(self, timeout: float) -> bool:
        """Refuse new requests, let running ones finish for up to `timeout` seconds, abort the
        rest. True when everything finished on its own."""
        ...

    async def shutdown(self) -> None:
        """Stop accepting, abort what is in flight, stop the engine (or leave it to its owner)."""


if TYPE_CHECKING:  # mypy (make lint) holds each front-end to the Protocol
    from serving.engine.frontend.async_engine import AsyncLLMEngine
    from serving.engine.frontend.attached_client import AttachedCoreClient
    from serving.engine.frontend.core_client import EngineCoreClient

    def _front_ends(
        a: AsyncLLMEngine, c: EngineCoreClient, t: AttachedCoreClient
    ) -> list[EngineClient]:
        return [a, c, t]
