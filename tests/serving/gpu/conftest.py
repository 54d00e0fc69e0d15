"""GPU tests: every test here is marked `gpu` and skipped cleanly where CUDA (or Triton) is
absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

_HERE = Path(__file__).parent
_REASON = None
if not torch.cuda.is_available():
    _REASON = "needs a CUDA GPU"
elif importlib.util.find_spec("triton") is None:
    _REASON = "needs the triton package"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
            if _REASON:
                item.add_marker(pytest.mark.skip(reason=_REASON))
