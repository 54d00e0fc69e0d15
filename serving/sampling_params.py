"""Per-request sampling parameters (the contract between the API layer and the engine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class SamplingParamsError(ValueError):
    """An invalid sampling parameter; `param` names it (the OpenAI error's `param`)."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


class RequestOutputKind(Enum):
    """What `LLMEngine.step()` hands out for a request (vLLM's names): every step's cumulative
    output (a streaming caller), or only the finished one (an offline caller that reads results
    at the end: no output object is built for each of its tokens)."""

    CUMULATIVE = "cumulative"
    FINAL_ONLY = "final_only"


@dataclass
class SamplingParams:
    n: int = 1
    max_tokens: int = 16
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = -1  # -1: off
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = (
        None  # None: off; k >= 0: the sampled token's logprob plus top-k alternatives
    )
    # None: off; k >= 0: each prompt token's logprob given the tokens before it, plus top-k
    # (the prompt is then computed in full: its prefix-cache hits carry no logits)
    prompt_logprobs: int | None = None
    include_stop_str_in_output: bool = False
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE

    def validate(self) -> None:
        checks = [
            ("n", 1 <= self.n <= 128, "n must be between 1 and 128"),
            ("max_tokens", self.max_tokens >= 1, "max_tokens must be at least 1"),
            ("temperature", 0.0 <= self.temperature <= 2.0, "temperature must be in [0, 2]"),
            ("top_p", 0.0 < self.top_p <= 1.0, "top_p must be in (0, 1]"),
            ("top_k", self.top_k == -1 or self.top_k >= 1, "top_k must be -1 (off) or >= 1"),
            ("min_p", 0.0 <= self.min_p <= 1.0, "min_p must be in [0, 1]"),
            (
                "frequency_penalty",
                -2.0 <= self.frequency_penalty <= 2.0,
                "frequency_penalty must be in [-2, 2]",
            ),
            (
                "presence_penalty",
                -2.0 <= self.presence_penalty <= 2.0,
                "presence_penalty must be in [-2, 2]",
            ),
            (
                "logprobs",
                self.logprobs is None or 0 <= self.logprobs <= 20,
                "logprobs must be in [0, 20]",
            ),
            (
                "prompt_logprobs",
                self.prompt_logprobs is None or 0 <= self.prompt_logprobs <= 20,
                "prompt_logprobs must be in [0, 20]",
            ),
            (
                "stop",
                len(self.stop) <= 16 and all(self.stop),
                "stop takes at most 16 non-empty strings",
            ),
        ]
        for param, ok, message in checks:
            if not ok:
                raise SamplingParamsError(param, message)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
