"""An LLM judge in the G-Eval manner, through any OpenAI-compatible endpoint: the engine's own
with the served model unless `VIGIL_JUDGE_URL` / `VIGIL_JUDGE_MODEL` name another
(`judge_from_settings`).

The rubric asks for one digit 1-5; the engine returns the first generated token's
`top_logprobs`, and the score is the probability-weighted mean of the digit tokens
(renormalised over the digits' mass), so a judge torn between 3 and 4 scores ~3.5 instead of
flipping. When the engine is down or overloaded the judge raises `EngineUnavailable`: the
evaluate job then stops and retries the same samples on its next run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.engine_api import EngineAPI, EngineRefused, EngineUnavailable
from vigil.config import Settings
from vigil.keys import internal_client_key

__all__ = ["EngineUnavailable", "Judge", "JudgeError", "Judgement", "judge_from_settings"]

RUBRIC = (
    "You are grading an AI assistant's answer.\n"
    "Rate how helpful, correct and on-topic the ANSWER is for the QUESTION on a scale of 1 to 5:\n"
    "1 = useless, wrong or off-topic; 2 = mostly unhelpful; 3 = partly helpful; "
    "4 = helpful with minor issues; 5 = fully helpful and correct.\n\n"
    "QUESTION:\n{prompt}\n\nANSWER:\n{response}\n\n"
    "Reply with a single digit from 1 to 5 and nothing else."
)
DIGITS = {str(d): d for d in range(1, 6)}
MAX_FIELD_CHARS = 2000  # keeps the judge prompt inside a small model's context


class JudgeError(ValueError):
    """The engine answered but the judgement is unusable (the sample is skipped, not retried)."""


@dataclass(frozen=True)
class Judgement:
    score: float  # in [1, 5]
    digit_mass: float  # total probability of the digit tokens among the top logprobs
    distribution: dict[str, float]  # digit -> renormalised probability
    source: str  # "logprobs" | "text" (no digit among top logprobs: the generated digit)


def judge_messages(prompt: str, response: str) -> list[dict[str, str]]:
    text = RUBRIC.format(prompt=prompt[:MAX_FIELD_CHARS], response=response[:MAX_FIELD_CHARS])
    return [{"role": "user", "content": text}]


def score_from_top_logprobs(top_logprobs: list[dict[str, Any]], generated: str = "") -> Judgement:
    """The G-Eval score from one token position's `top_logprobs` ([{token, logprob}, ...])."""
    mass: dict[str, float] = {}
    for entry in top_logprobs:
        token = str(entry.get("token", "")).strip()
        logprob = entry.get("logprob")
        if token in DIGITS and isinstance(logprob, int | float) and math.isfinite(logprob):
            mass[token] = mass.get(token, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total > 0:
        dist = {d: p / total for d, p in sorted(mass.items())}
        score = sum(DIGITS[d] * p for d, p in dist.items())
        return Judgement(score, total, dist, "logprobs")
    first = next((ch for ch in generated if ch in DIGITS), None)
    if first is None:
        raise JudgeError(f"the judge answered {generated[:40]!r}: no digit 1-5")
    return Judgement(float(DIGITS[first]), 0.0, {first: 1.0}, "text")


class Judge:
    """Calls `{engine_url}/v1/chat/completions` with logprobs; one client, reused."""

    def __init__(
        self, engine_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 60.0
    ) -> None:
        # the judge's own calls must not be sampled as traffic and then judged themselves
        self.model = model
        self.api = EngineAPI(engine_url, reason="judge", api_key=api_key, timeout_s=timeout_s)

    def close(self) -> None:
        self.api.close()

    def judge(self, prompt: str, response: str) -> Judgement:
        body = {
            "model": self.model,
            "messages": judge_messages(prompt, response),
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": True,
            "top_logprobs": 20,
        }
        try:
            choice = self.api.first_choice("/v1/chat/completions", body)
        except EngineRefused as exc:
            raise JudgeError(f"the judge request: {exc}") from None
        try:
            generated = choice["message"].get("content") or ""
            content = (choice.get("logprobs") or {}).get("content") or []
            top = content[0].get("top_logprobs") or [] if content else []
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise JudgeError(f"malformed chat completion from the engine: {exc!r}") from None
        return score_from_top_logprobs(top, generated)


def judge_from_settings(settings: Settings) -> Judge:
    """The configured judge. Its key is `judge_api_key`; without one, the engine's own endpoint
    gets the sidecar's internal key and another endpoint gets no key (the internal key is never
    sent to a third party)."""
    if settings.judge_api_key is not None:
        key: str | None = settings.judge_api_key.get_secret_value()
    else:
        key = internal_client_key(settings) if settings.judge_url is None else None
    return Judge(
        settings.judge_url or settings.engine_url,
        settings.judge_model or settings.model_name,
        api_key=key,
        timeout_s=settings.judge_timeout_s,
    )
