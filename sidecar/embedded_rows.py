"""How many of a drift window's rows the embedding tests read (Settings.drift_max_embedded_rows).

The window is read under its row cap (Settings.drift_max_window_rows) and every read row feeds the
numeric and categorical tests; the embedding tests read a nested stratified subset of it
(storage.repositories.window_cap.nested_selection), and only those rows need vectors. The
subset's size follows the embedder. On CUDA it embeds thousands of chat-length texts a second,
so the whole capped window is embedded within a minute. A small CPU embeds tens a second
(bench/results/scale.md): the default 50,000-row window (~100,000 texts) would take longer than
the hour between windows and the embed job would never catch up, while CPU_EMBEDDED_ROWS rows
(about 8,000 texts) take minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sidecar.embed_device import resolve_device

if TYPE_CHECKING:
    from vigil.config import Settings

CPU_EMBEDDED_ROWS = 4000


def embedded_rows_cap(settings: Settings, cuda_available: Callable[[], bool] | None = None) -> int:
    """Rows per window whose vectors the embedding tests read: `auto` is the window cap when the
    embedder runs on CUDA and CPU_EMBEDDED_ROWS on a CPU; never more than the window cap."""
    window = settings.drift_max_window_rows
    setting = settings.drift_max_embedded_rows
    if setting == "auto":
        device = (
            resolve_device(settings.embed_device, cuda_available)
            if cuda_available is not None
            else resolve_device(settings.embed_device)
        )
        on_cuda = device == "cuda"
        return window if on_cuda else min(window, CPU_EMBEDDED_ROWS)
    return min(int(setting), window)
