"""vigil/config.py: bad values stop start-up with a message naming the VIGIL_ variable, and
outside development the default secrets and empty API keys are refused."""

from __future__ import annotations

import pytest

from vigil.config import DEFAULT_DEV_API_KEY, DEFAULT_SECRET, ConfigError, load_settings

STRONG = "s3cret-that-is-long-enough"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No stray VIGIL_* variables or .env file from the developer's shell."""
    import os

    for name in list(os.environ):
        if name.startswith("VIGIL_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_defaults_are_valid_for_development():
    settings = load_settings()
    assert settings.env == "development" and settings.is_sqlite
    assert settings.api_keys == [DEFAULT_DEV_API_KEY] and 0 <= settings.sample_rate <= 1


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("VIGIL_DATABASE_URL", "not a url::", "not a database URL"),
        ("VIGIL_DATABASE_URL", "mysql://u@h/db", "not supported"),
        ("VIGIL_SAMPLE_RATE", "-0.5", "greater than or equal to 0"),
        ("VIGIL_SAMPLE_RATE", "often", "valid number"),
        ("VIGIL_DEVICE", "tpu", "auto"),
        ("VIGIL_WRITER_BATCH_SIZE", "0", "greater than 0"),
        ("VIGIL_PORT", "70000", "less than 65536"),
        ("VIGIL_WEBHOOK_TARGETS", '["ftp://x"]', "http"),
    ],
)
def test_bad_value_names_the_variable(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    text = str(info.value)
    assert variable in text and message in text


def test_every_bad_variable_is_listed_at_once(monkeypatch):
    monkeypatch.setenv("VIGIL_SAMPLE_RATE", "2")
    monkeypatch.setenv("VIGIL_DEVICE", "quantum")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert "VIGIL_SAMPLE_RATE" in str(info.value) and "VIGIL_DEVICE" in str(info.value)


def test_dotenv_file_is_read(tmp_path):
    (tmp_path / ".env").write_text("VIGIL_SAMPLE_RATE=0.25\nVIGIL_DEVICE=cpu\n")
    settings = load_settings()
    assert settings.sample_rate == 0.25 and settings.device == "cpu"


@pytest.mark.parametrize("env", ["staging", "production"])
def test_non_development_refuses_default_secrets(monkeypatch, env):
    monkeypatch.setenv("VIGIL_ENV", env)
    with pytest.raises(ConfigError) as info:
        load_settings()
    text = str(info.value)
    assert "VIGIL_API_KEYS" in text and "VIGIL_WEBHOOK_SECRET" in text


@pytest.mark.parametrize(
    ("keys", "secret", "named"),
    [
        ("[]", STRONG, "VIGIL_API_KEYS"),
        ('["  "]', STRONG, "VIGIL_API_KEYS"),
        (f'["{DEFAULT_DEV_API_KEY}"]', STRONG, "VIGIL_API_KEYS"),
        ('["k-123"]', DEFAULT_SECRET, "VIGIL_WEBHOOK_SECRET"),
        ('["k-123"]', "", "VIGIL_WEBHOOK_SECRET"),
        ('["k-123"]', "short", "VIGIL_WEBHOOK_SECRET"),
    ],
)
def test_production_refuses_each_insecure_setting(monkeypatch, keys, secret, named):
    monkeypatch.setenv("VIGIL_ENV", "production")
    monkeypatch.setenv("VIGIL_API_KEYS", keys)
    monkeypatch.setenv("VIGIL_WEBHOOK_SECRET", secret)
    with pytest.raises(ConfigError, match=named):
        load_settings()


def test_production_with_real_secrets_starts(monkeypatch):
    monkeypatch.setenv("VIGIL_ENV", "production")
    monkeypatch.setenv("VIGIL_API_KEYS", '["k-123-long-enough-1", "k-456-long-enough-2"]')
    monkeypatch.setenv("VIGIL_WEBHOOK_SECRET", STRONG)
    monkeypatch.setenv("VIGIL_SECRET_KEY", STRONG + "-session")
    monkeypatch.setenv("VIGIL_DATABASE_URL", "postgresql+psycopg://vigil@db:5432/vigil")
    settings = load_settings()
    assert (
        settings.api_keys == ["k-123-long-enough-1", "k-456-long-enough-2"]
        and not settings.is_sqlite
    )


def test_the_served_model_name_comes_from_the_model_path(monkeypatch):
    from vigil.config import load_settings

    monkeypatch.delenv("VIGIL_MODEL_NAME", raising=False)
    monkeypatch.delenv("VIGIL_MODEL_VERSION", raising=False)
    s = load_settings(model_path="/models/gemma-3-1b-it/")
    assert (s.model_name, s.model_version) == ("gemma-3-1b-it", "gemma-3-1b-it")
    assert load_settings(model_path="/m/Qwen3-0.6B-Q8_0.gguf").model_name == "Qwen3-0.6B-Q8_0"
    named = load_settings(model_path="/models/gemma-3-1b-it", model_name="prod-chat")
    assert named.model_name == "prod-chat"
    assert load_settings().model_name == "SmolLM2-135M-Instruct"  # the packaged default
    monkeypatch.setenv("VIGIL_MODEL_NAME", "from-env")
    assert load_settings(model_path="/models/x").model_name == "from-env"


def test_serve_takes_a_served_model_name():
    from vigil.cli.main import build_parser

    args = build_parser().parse_args(["serve", "--model", "/m/x", "--served-model-name", "chat"])
    assert (args.model, args.served_model_name) == ("/m/x", "chat")
