"""The embedder's device, precision, threads and token-length batches, on the CPU (the CUDA
side is tests/sidecar/test_embed_device_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.embed_device import (
    EmbedConfig,
    EmbedDeviceError,
    resolve_batch_tokens,
    resolve_device,
    resolve_dtype,
    token_batches,
)
from sidecar.embedder import Embedder, get_embedder
from vigil.config import ConfigError, load_settings


def test_device_selection():
    assert resolve_device("cpu", lambda: True) == "cpu"
    assert resolve_device("auto", lambda: True) == "cuda"
    assert resolve_device("auto", lambda: False) == "cpu"
    assert resolve_device("cuda", lambda: True) == "cuda"
    with pytest.raises(EmbedDeviceError, match="VIGIL_EMBED_DEVICE=cuda, but no CUDA device"):
        resolve_device("cuda", lambda: False)
    with pytest.raises(EmbedDeviceError, match="auto, cpu or cuda"):
        resolve_device("tpu", lambda: True)


def test_batch_tokens_follow_the_device_unless_set(monkeypatch):
    assert resolve_batch_tokens("auto", "cuda") == 16_384
    assert resolve_batch_tokens("auto", "cpu") == 4_096  # lower activation peak, as fast
    assert resolve_batch_tokens(2048, "cuda") == 2048
    assert load_settings().embed_batch_tokens == "auto"
    monkeypatch.setenv("VIGIL_EMBED_BATCH_TOKENS", "8192")
    assert load_settings().embed_batch_tokens == 8192
    monkeypatch.setenv("VIGIL_EMBED_BATCH_TOKENS", "100")
    with pytest.raises(ConfigError):
        load_settings()


def test_precision_selection():
    assert resolve_dtype("auto", "cpu") == "fp32"
    assert resolve_dtype("auto", "cuda") == "fp32"  # half precision is no faster on CUDA
    assert resolve_dtype("fp16", "cuda") == "fp16" and resolve_dtype("bf16", "cuda") == "bf16"
    assert resolve_dtype("fp32", "cuda") == "fp32"
    for half in ("fp16", "bf16"):
        with pytest.raises(EmbedDeviceError, match=f"VIGIL_EMBED_DTYPE={half} needs CUDA"):
            resolve_dtype(half, "cpu")


def test_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("VIGIL_EMBED_DEVICE", "cuda")
    monkeypatch.setenv("VIGIL_EMBED_DTYPE", "fp16")
    monkeypatch.setenv("VIGIL_EMBED_THREADS", "3")
    config = EmbedConfig.from_settings(load_settings())
    assert (config.device, config.dtype, config.threads) == ("cuda", "fp16", 3)
    monkeypatch.delenv("VIGIL_EMBED_THREADS")
    monkeypatch.setenv("VIGIL_TORCH_THREADS", "2")  # the process-wide setting is the fallback
    assert EmbedConfig.from_settings(load_settings()).threads == 2
    monkeypatch.setenv("VIGIL_EMBED_DEVICE", "gpu")
    with pytest.raises(ConfigError, match="VIGIL_EMBED_DEVICE"):
        load_settings()


def test_asking_for_cuda_on_a_cpu_host_fails_at_load(monkeypatch):
    monkeypatch.setattr("sidecar.embed_device._cuda_available", lambda: False)
    with pytest.raises(EmbedDeviceError, match="no CUDA device is visible"):
        get_embedder(EmbedConfig(device="cuda"))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    lengths=st.lists(st.integers(0, 300), max_size=300),
    max_tokens=st.integers(1, 5000),
    max_rows=st.integers(1, 64),
)
def test_token_batches_cover_every_text_once_within_the_budget(lengths, max_tokens, max_rows):
    batches = token_batches(lengths, max_tokens, max_rows)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        assert 1 <= len(b) <= max_rows
        assert len(b) == 1 or len(b) * max(max(lengths[i] for i in b), 1) <= max_tokens
    # shortest first: a later batch never holds a shorter text than an earlier one's longest
    for a, b in zip(batches, batches[1:], strict=False):
        assert max(lengths[i] for i in a) <= min(lengths[i] for i in b)


def test_batched_vectors_equal_the_models_own_in_the_callers_order(embedder):
    texts = [
        "hi",
        "How do I rotate an API key without downtime?",
        "x " * 300,
        "Why does my deployment fail with exit code 137 after the upgrade to 2.4?",
        "",
        "ok",
    ] * 3
    plain = embedder.model.encode(
        texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
    )
    small = Embedder(embedder.name, embedder.model, batch_tokens=256)  # many small batches
    for e in (embedder, small):
        got = e.encode(texts)
        assert got.dtype == np.float32 and got.shape == (len(texts), 384)
        np.testing.assert_allclose(got, plain, atol=2e-5)
