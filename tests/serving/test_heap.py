"""Serving processes freeze their start-up heap once ready (serving/heap.py), so full garbage
collections while serving walk only what requests allocated: the API process once its engine is
loaded (here), the engine-core process before it says it is ready (test_engine_core_process)."""

from __future__ import annotations

import asyncio
import gc
import time

from engine_doubles import EngineClientDouble

from serving.heap import freeze_startup_heap
from serving.server.base.state import Phase
from serving.server.service.app import create_app
from vigil.config import load_settings


def test_freeze_moves_live_objects_out_of_collection_and_keeps_collecting_new_garbage():
    try:
        kept = [object() for _ in range(1000)]
        assert freeze_startup_heap() >= len(kept)
        cycle: list = []
        cycle.append(cycle)  # garbage made after the freeze is still collected
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()


class LoadedEngine(EngineClientDouble):
    max_model_len = 512

    def num_waiting(self):
        return 0

    def stats(self):
        return None

    async def shutdown(self):
        pass


def test_the_app_freezes_once_its_engine_is_loaded():
    app = create_app(
        load_settings(env="development", api_keys=["k" * 24]),
        log_traffic=False,
        engine_loader=lambda settings: LoadedEngine(),
    )
    gc.unfreeze()

    async def main():
        async with app.router.lifespan_context(app):
            deadline = time.monotonic() + 30
            while app.state.vigil.phase is not Phase.READY and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return app.state.vigil.phase, gc.get_freeze_count()

    try:
        phase, frozen = asyncio.run(main())
        assert phase is Phase.READY and frozen > 0
    finally:
        gc.unfreeze()
