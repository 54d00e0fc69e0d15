"""Runs canary probes through the engine's OpenAI-compatible API: greedy (temperature 0), a fixed
seed, logprobs, and vLLM's `return_token_ids` so the generated token ids come back. Every request
carries the internal marker header, so the engine never logs a canary as traffic."""

from __future__ import annotations

from typing import Any

import httpx

from drift.canary import Observation, perplexity
from sidecar.canary.probes import Probe
from vigil.internal import INTERNAL_HEADER

INTERNAL_VALUE = "canary"  # the reason sent in the internal marker header


class EngineUnavailable(RuntimeError):
    """The engine could not be reached or is overloaded: the run is retried at the next interval."""


class ProbeFailed(RuntimeError):
    """The engine answered a probe with something unusable (names the probe)."""


class CanaryClient:
    def __init__(self, engine_url: str, model: str, *, api_key: str | None, seed: int,
                 timeout_s: float = 300.0, transport: httpx.BaseTransport | None = None) -> None:
        headers = {INTERNAL_HEADER: INTERNAL_VALUE}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.model, self.seed = model, seed
        self.http = httpx.Client(base_url=engine_url.rstrip("/"), headers=headers, timeout=timeout_s,
                                 transport=transport)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> CanaryClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _post(self, path: str, body: dict[str, Any], probe: str) -> dict[str, Any]:
        try:
            reply = self.http.post(path, json=body)
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"engine unreachable: {exc.__class__.__name__}: {exc}") from exc
        if reply.status_code in (408, 425, 429) or reply.status_code >= 500:
            raise EngineUnavailable(f"engine answered {reply.status_code}: {reply.text[:200]}")
        if reply.status_code != 200:
            raise ProbeFailed(f"probe {probe}: engine refused it ({reply.status_code}): {reply.text[:300]}")
        try:
            return reply.json()["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ProbeFailed(f"probe {probe}: malformed answer from the engine ({exc!r})") from None

    def engine_identity(self) -> dict[str, Any]:
        """The model card's version and engine description (empty when unavailable)."""
        try:
            reply = self.http.get("/v1/models")
            card = reply.json()["data"][0] if reply.status_code == 200 else {}
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
            return {}
        return {"model_version": card.get("root"), **(card.get("engine") or {})}

    def run(self, probe: Probe) -> Observation:
        if probe.kind == "chat":
            return self._generate(probe, "/v1/chat/completions", {
                "messages": [m.model_dump() for m in probe.messages or []], "logprobs": True})
        if probe.kind == "tokens":
            return self._generate(probe, "/v1/completions", {
                "prompt": list(probe.prompt_token_ids or []), "logprobs": 0})
        return self._perplexity(probe)

    def filler(self, text: str, seed: int, max_tokens: int = 16) -> None:
        """Sampled (not greedy) background traffic for the busy-batch calibration runs."""
        body = {"model": self.model, "messages": [{"role": "user", "content": text}],
                "max_tokens": max_tokens, "temperature": 1.0, "seed": seed, "ignore_eos": True}
        self._post("/v1/chat/completions", body, "filler")

    def _generate(self, probe: Probe, path: str, extra: dict[str, Any]) -> Observation:
        # ignore_eos: every run compares the same number of tokens
        body = {"model": self.model, "max_tokens": probe.max_tokens, "temperature": 0.0,
                "seed": self.seed, "ignore_eos": True, "return_token_ids": True, **extra}
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
            raise ProbeFailed(f"probe {probe.name}: the answer lacks token ids or logprobs ({exc!r}); "
                              "the engine must support return_token_ids") from None

    def _perplexity(self, probe: Probe) -> Observation:
        body = {"model": self.model, "prompt": probe.text, "echo": True, "logprobs": 0,
                "max_tokens": 1, "temperature": 0.0, "seed": self.seed, "return_token_ids": True}
        choice = self._post("/v1/completions", body, probe.name)
        try:
            prompt_ids = choice["prompt_token_ids"]
            scored = choice["logprobs"]["token_logprobs"][1 : len(prompt_ids)]
            if len(prompt_ids) < 2 or any(x is None for x in scored):
                raise ValueError("fewer than two prompt tokens, or unscored ones")
            return Observation.of(prompt_ids[1:], scored, perplexity(scored))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProbeFailed(f"probe {probe.name}: no prompt logprobs in the answer ({exc!r}); "
                              "the engine must support echo with logprobs") from None
