"""Drift tests share 2 cores with the rest of the suite: one torch / BLAS / OpenMP thread.

(On a busy 2-core box multi-threaded pools oversubscribe and run ~10x slower.)
"""

import torch
from threadpoolctl import threadpool_limits

torch.set_num_threads(1)
_LIMITS = threadpool_limits(1)  # kept referenced: the limit holds for the session
