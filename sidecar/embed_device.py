"""Where and how the sidecar's embedder runs: device (VIGIL_EMBED_DEVICE), precision
(VIGIL_EMBED_DTYPE), CPU threads (VIGIL_EMBED_THREADS) and the padded-token budget of a batch
(VIGIL_EMBED_BATCH_TOKENS), read once from Settings.

Precision on CUDA, against fp32 CPU vectors of chat-length text (rows renormalised in fp32;
bench/results/scale.md, tests/sidecar/test_embed_device_gpu.py): fp16 keeps a cosine >= 0.99999
and bf16 >= 0.9998, both within the stated 0.999, so both are allowed on CUDA. Neither is faster
than fp32 (the embedder is bound by tokenisation and the host, not the GPU), so `auto` is fp32 on
CUDA too. Half precision on the CPU is a setting error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # settings are read, not imported: the embedder runs without pydantic too
    from vigil.config import Settings

HALF = ("fp16", "bf16")
AUTO_CUDA_DTYPE = "fp32"


class EmbedDeviceError(ValueError):
    """A device or precision setting this machine cannot honour; the message says which."""


@dataclass(frozen=True)
class EmbedConfig:
    model_path: str | None = None
    device: str = "auto"  # auto | cpu | cuda
    dtype: str = "auto"  # auto | fp32 | fp16 | bf16
    threads: int | None = None  # torch CPU threads of the process, set when the model loads on CPU
    batch_tokens: int | str = "auto"  # padded tokens in one forward pass (resolve_batch_tokens)

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbedConfig:
        return cls(
            settings.embedding_model_path,
            settings.embed_device,
            settings.embed_dtype,
            settings.embed_threads or settings.torch_threads,
            settings.embed_batch_tokens,
        )


CUDA_BATCH_TOKENS = 16_384
CPU_BATCH_TOKENS = 4_096  # as fast on a CPU; the attention and FFN activations peak far lower


def resolve_batch_tokens(setting: int | str, device: str) -> int:
    """Padded tokens per forward pass: `auto` by the device, a number as given."""
    if setting == "auto":
        return CUDA_BATCH_TOKENS if device == "cuda" else CPU_BATCH_TOKENS
    return int(setting)


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def resolve_device(setting: str, cuda_available: Callable[[], bool] = _cuda_available) -> str:
    """ "cpu" or "cuda": `auto` takes CUDA when a device is visible; `cuda` without one is an
    error (a sidecar told to use the GPU should not crawl along on the CPU unnoticed)."""
    if setting == "cpu":
        return "cpu"
    if setting == "auto":
        return "cuda" if cuda_available() else "cpu"
    if setting == "cuda":
        if not cuda_available():
            raise EmbedDeviceError(
                "VIGIL_EMBED_DEVICE=cuda, but no CUDA device is visible "
                "(a CPU torch build, or CUDA_VISIBLE_DEVICES empty); use auto or cpu"
            )
        return "cuda"
    raise EmbedDeviceError(f"VIGIL_EMBED_DEVICE must be auto, cpu or cuda, not {setting!r}")


def resolve_dtype(setting: str, device: str) -> str:
    """fp32 on the CPU and, by default, on CUDA; fp16 or bf16 on CUDA when asked."""
    if setting == "auto":
        return AUTO_CUDA_DTYPE if device == "cuda" else "fp32"
    if setting == "fp32":
        return "fp32"
    if setting in HALF:
        if device != "cuda":
            raise EmbedDeviceError(
                f"VIGIL_EMBED_DTYPE={setting} needs CUDA; the embedder runs on {device}"
            )
        return setting
    raise EmbedDeviceError(f"VIGIL_EMBED_DTYPE must be auto, fp32, fp16 or bf16, not {setting!r}")


def token_batches(lengths: list[int], max_tokens: int, max_rows: int) -> list[list[int]]:
    """Indices of texts in batches of similar token length: shortest first, a batch closes
    before its padded size (rows x its longest text) would pass `max_tokens` or its rows
    `max_rows`; a text longer than the budget goes alone. Every index appears once."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:  # ascending: the newest text is the batch's longest
        if current and (
            (len(current) + 1) * max(lengths[i], 1) > max_tokens or len(current) >= max_rows
        ):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
