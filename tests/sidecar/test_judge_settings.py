"""The judge's endpoint, model and key come from settings and reach a real OpenAI-compatible
HTTP server; the served model through the engine stays the default; the internal key never goes
to another endpoint, and the configured key never shows in the settings' printed form."""

from __future__ import annotations

import pytest
from sidecar_servers import OPERATOR_KEY, JudgeEngine

from sidecar.evals.judge import judge_from_settings
from vigil.config import ConfigError, load_settings

SECRET = "sk-judge-secret-0123456789"


def _one_call(settings, engine: JudgeEngine) -> tuple[str, dict[str, str], dict]:
    """(the judge's model, the headers and the body the server received) of one judgement."""
    judge = judge_from_settings(settings)
    try:
        verdict = judge.judge("How do I bake salmon fillets?", "Bake salmon fillets at 200 C.")
    finally:
        judge.close()
    assert 1.0 <= verdict.score <= 5.0 and len(engine.seen) == 1
    path, headers, body = engine.seen[0]
    assert path == "/v1/chat/completions"
    return judge.model, {k.lower(): v for k, v in headers.items()}, body


def test_a_configured_endpoint_gets_the_configured_model_and_key(tmp_path):
    with JudgeEngine() as engine:
        settings = load_settings(
            database_url=f"sqlite:///{tmp_path / 'v.db'}",
            engine_url="http://127.0.0.1:9",  # nobody listens: the judge must not go there
            operator_keys=[OPERATOR_KEY],
            judge_url=engine.url + "/",
            judge_model="gpt-judge-large",
            judge_api_key=SECRET,
        )
        model, headers, body = _one_call(settings, engine)
    assert model == body["model"] == "gpt-judge-large"
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert body["logprobs"] is True and body["max_tokens"] == 1
    assert SECRET not in repr(settings) and SECRET not in str(settings.model_dump())


def test_the_served_model_through_the_engine_is_the_default(tmp_path):
    with JudgeEngine() as engine:
        settings = load_settings(
            database_url=f"sqlite:///{tmp_path / 'v.db'}",
            engine_url=engine.url,
            operator_keys=[OPERATOR_KEY],
        )
        model, headers, body = _one_call(settings, engine)
    assert model == body["model"] == settings.model_name == "SmolLM2-135M-Instruct"
    assert headers["authorization"] == f"Bearer {OPERATOR_KEY}"  # may mark its calls internal
    assert headers["x-vigil-internal"] == "judge"


def test_another_endpoint_without_a_key_never_gets_the_internal_key(tmp_path):
    with JudgeEngine() as engine:
        settings = load_settings(
            database_url=f"sqlite:///{tmp_path / 'v.db'}",
            operator_keys=[OPERATOR_KEY],
            judge_url=engine.url,
        )
        model, headers, _body = _one_call(settings, engine)
    assert "authorization" not in headers
    assert model == settings.model_name  # no judge model named: the served model's name


@pytest.mark.parametrize(
    ("field", "value"),
    [("judge_url", "ftp://judge"), ("judge_auc", 1.5), ("judge_timeout_s", 0)],
)
def test_bad_judge_settings_are_refused_naming_the_variable(tmp_path, field, value):
    with pytest.raises(ConfigError, match=f"VIGIL_{field.upper()}"):
        load_settings(database_url=f"sqlite:///{tmp_path / 'v.db'}", **{field: value})
