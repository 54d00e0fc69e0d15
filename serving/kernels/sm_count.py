"""How many streaming multiprocessors a device has: the count a grid must reach to fill it.

Read once per device from the CUDA properties and kept (it never changes while the process runs).
Where no CUDA device is visible (CPU tests, planning on a host without a GPU) a data-centre GPU's
count stands in, so the same shapes plan the same grids as before the device was read.
"""

from __future__ import annotations

import functools

import torch

FALLBACK_SMS = 132


def sm_count(device: torch.device | str | int | None = None) -> int:
    """The SM count of `device` (default: the current CUDA device), or FALLBACK_SMS off CUDA."""
    if device is not None and not isinstance(device, int):
        device = torch.device(device)
        if device.type != "cuda":
            return FALLBACK_SMS
        device = device.index
    if not torch.cuda.is_available():
        return FALLBACK_SMS
    return _device_sms(torch.cuda.current_device() if device is None else device)


@functools.cache
def _device_sms(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)
