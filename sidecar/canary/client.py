"""Runs canary probes through the engine's OpenAI-compatible API: greedy (temperature 0), a fixed
seed, logprobs, and vLLM's `return_token_ids` so the generated token ids come back. Every request
carries the internal marker header, so the engine never logs a canary as traffic."""

from __future__ import annotations

from typing import Any

import httpx

from drift.detectors.canary import Observation, perplexity
from sidecar.canary.probes import Probe
from sidecar.engine_api import EngineAPI, EngineRefused, EngineUnavailable

__all__ = ["CanaryClient", "EngineUnavailable", "ProbeFailed"]
INTERNAL_VALUE = "canary"  # the reason sent in the internal marker header


class ProbeFailed(RuntimeError):
    """The engine answered a probe with something unusable (names the probe)."""


class CanaryClient:
    def __init__(
        self,
        engine_url: str,
        model: str,
        *,
        api_key: str | None,
        seed: int,
        timeout_s: float = 300.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model, self.seed = model, seed
        self.api = EngineAPI(
            engine_url,
            reason=INTERNAL_VALUE,
            api_key=api_key,
            timeout_s=timeout_s,
            transport=transport,
        )

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> CanaryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, path: str, body: dict[str, Any], probe: str) -> dict[str, Any]:
        try:
            return self.api.first_choice(path, body)
        except EngineRefused as exc:
            raise ProbeFailed(f"probe {probe}: {exc}") from None

    def engine_identity(self) -> dict[str, Any]:
        """The model card's version and engine description (empty when unavailable)."""
        card = self.api.model_card()
        if not card:
            return {}
        return {"model_version": card.get("root"), **(card.get("engine") or {})}

    def run(self, probe: Probe) -> Observation:
        if probe.kind == "chat":
            return self._generate(
                probe,
                "/v1/chat/completions",
                {"messages": [m.model_dump() for m in probe.messages or []], "logprobs": True},
            )
        if probe.kind == "tokens":
            return self._generate(
                probe,
                "/v1/completions",
                {"prompt": list(probe.prompt_token_ids or []), "logprobs": 0},
            )
        return self._perplexity(probe)

    def filler(self, text: str, seed: int, max_tokens: int = 16) -> None:
        """Sampled (not greedy) background traffic for the busy-batch calibration runs."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens,
            "temperature": 1.0,
            "seed": seed,
            "ignore_eos": True,
        }
        self._post("/v1/chat/completions", body, "filler")

    def _generate(self, probe: Probe, path: str, extra: dict[str, Any]) -> Observation:
        # ignore_eos: every run compares the same number of tokens
        body = {
            "model": self.model,
            "max_tokens": probe.max_tokens,
            "temperature": 0.0,
            "seed": self.seed,
            "ignore_eos": True,
            "return_token_ids": True,
            **extra,
        }
        choice = self._post(path, body, probe.name)
        try:
            ids = choice["token_ids"]
            lp = choice["logprobs"]
            if probe.kind == "chat":
                logprobs = [entry["logprob"] for entry in lp["content"]]
            else:
                logprobs = lp["token_logprobs"]
            return Observation.of(ids, logprobs)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProbeFailed(
                f"probe {probe.name}: the answer lacks token ids or logprobs ({exc!r}); "
                "the engine must support return_token_ids"
            ) from None

    def _perplexity(self, probe: Probe) -> Observation:
        body = {
            "model": self.model,
            "prompt": probe.text,
            "echo": True,
            "logprobs": 0,
            "max_tokens": 1,
            "temperature": 0.0,
            "seed": self.seed,
            "return_token_ids": True,
        }
        choice = self._post("/v1/completions", body, probe.name)
        try:
            prompt_ids = choice["prompt_token_ids"]
            scored = choice["logprobs"]["token_logprobs"][1 : len(prompt_ids)]
            if len(prompt_ids) < 2 or any(x is None for x in scored):
                raise ValueError("fewer than two prompt tokens, or unscored ones")
            return Observation.of(prompt_ids[1:], scored, perplexity(scored))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProbeFailed(
                f"probe {probe.name}: no prompt logprobs in the answer ({exc!r}); "
                "the engine must support echo with logprobs"
            ) from None
