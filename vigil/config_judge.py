"""The settings of the LLM judge (sidecar.evals.judge): which OpenAI-compatible endpoint and
model score the answers, the key it is called with, and the measured validity of its scores.
Part of the one settings object: `vigil.config.Settings` inherits these fields.

Unset, the judge is the served model through the engine's own endpoint (`engine_url`,
`model_name`) with the sidecar's internal key. The key is a secret: it is held as a
`SecretStr`, so printing or logging the settings shows `**********`, never the key.
"""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings


class JudgeSettings(BaseSettings):
    """A base of `vigil.config.Settings`, never used alone."""

    # an OpenAI-compatible base URL (`{judge_url}/v1/chat/completions`); None: engine_url
    judge_url: str | None = None
    # the model the judge asks for; None: model_name (the served model)
    judge_model: str | None = None
    # sent as `Authorization: Bearer`; None: the key the sidecar calls the engine with
    judge_api_key: SecretStr | None = None
    judge_timeout_s: float = Field(60.0, gt=0)
    # the ROC AUC with which the judge's score separates right from wrong answers, as measured by
    # bench/suites/bench_judge_validity.py for this judge model; shown on the baselines page
    judge_auc: float | None = Field(None, ge=0.0, le=1.0)

    @field_validator("judge_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value
