"""Drift tests share 2 cores with the rest of the suite: one torch / BLAS / OpenMP thread.

(On a small busy machine multi-threaded pools oversubscribe and run ~10x slower.) Module-scoped
and restored afterwards, so the rest of the suite keeps its own thread settings.
"""

import pytest
import torch
from threadpoolctl import threadpool_limits


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)
