"""Keep what a serving process built at start-up out of the garbage collector's full passes.

An API process imports torch, tokenizers and the model code while loading its engine client; the
engine-core process holds the model, the tokenizer and the engine besides: hundreds of thousands to
a million objects that live as long as the process. Every full (generation 2) collection walks them
all, a tenth to a quarter of a second on a small machine (a stall of every stream when the engine
core does it: bench/suites/bench_core_loop.py), and serving allocates enough long-lived objects
(requests, sequences, streams, outputs) to trigger such passes. `gc.freeze()` moves everything alive
at that moment to a generation the collector never scans; later garbage is collected as before. Both
processes freeze once they are ready, as vLLM's engine core does; so does each `vigil proxy`
process, whose loop relays every stream it holds.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)


def freeze_startup_heap() -> int:
    """Collect once, then freeze the survivors; returns how many objects were frozen."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info(
        "froze %d start-up objects out of garbage collection (%.0f ms)",
        frozen,
        1e3 * (time.perf_counter() - started),
    )
    return frozen
