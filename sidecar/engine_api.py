"""The sidecar's one client of the engine's own OpenAI-compatible API (canary probes, the LLM
judge): the internal marker header (so the engine never logs these calls as traffic), the key,
and one reading of the engine's answers — unreachable or overloaded is `EngineUnavailable` (the
caller retries at its next run), any other refusal or a malformed body is `EngineRefused`
(the caller names what it asked for)."""

from __future__ import annotations

from typing import Any

import httpx

from vigil.internal import INTERNAL_HEADER

RETRY_LATER = (408, 425, 429)


class EngineUnavailable(RuntimeError):
    """The engine could not be reached or is overloaded: retry at the next interval."""


class EngineRefused(ValueError):
    """The engine answered, but with a refusal or a body without a usable first choice."""


class EngineAPI:
    def __init__(
        self,
        engine_url: str,
        *,
        reason: str,
        api_key: str | None,
        timeout_s: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {INTERNAL_HEADER: reason}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.http = httpx.Client(
            base_url=engine_url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport
        )

    def close(self) -> None:
        self.http.close()

    def first_choice(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` and return `choices[0]` of the answer."""
        try:
            reply = self.http.post(path, json=body)
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"engine unreachable: {exc.__class__.__name__}: {exc}") from exc
        if reply.status_code in RETRY_LATER or reply.status_code >= 500:
            raise EngineUnavailable(f"engine answered {reply.status_code}: {reply.text[:200]}")
        if reply.status_code != 200:
            raise EngineRefused(f"engine refused it ({reply.status_code}): {reply.text[:300]}")
        try:
            choice = reply.json()["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise EngineRefused(f"malformed answer from the engine ({exc!r})") from None
        if not isinstance(choice, dict):
            raise EngineRefused(
                f"malformed answer from the engine (choice is {type(choice).__name__})"
            )
        return choice

    def model_card(self) -> dict[str, Any]:
        """The first model card of /v1/models (empty when unavailable)."""
        try:
            reply = self.http.get("/v1/models")
            card = reply.json()["data"][0] if reply.status_code == 200 else {}
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
            return {}
        return card if isinstance(card, dict) else {}
