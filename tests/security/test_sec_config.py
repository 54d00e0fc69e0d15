"""Configuration fails closed: development defaults only on loopback, a minimum key length,
no manifest placeholders, and a key cannot hold two roles."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vigil.config import DEFAULT_DEV_API_KEY, ConfigError, load_settings

ROOT = Path(__file__).resolve().parents[2]
GOOD = dict(api_keys=["k" * 24], webhook_secret="w" * 24, secret_key="s" * 24)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("VIGIL_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    "bind", [dict(host="0.0.0.0"), dict(sidecar_host="0.0.0.0"), dict(host="10.1.2.3")]
)
def test_dev_defaults_refused_on_a_public_bind(bind):
    """Was: VIGIL_ENV=development (the default) let the dev key and secret serve on 0.0.0.0."""
    with pytest.raises(ConfigError, match="non-loopback"):
        load_settings(**bind)
    assert load_settings(**bind, **GOOD).host in ("0.0.0.0", "127.0.0.1", "10.1.2.3")


def test_loopback_development_keeps_its_defaults():
    assert load_settings().api_keys == [DEFAULT_DEV_API_KEY]


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("api_keys", ["short-key"], "VIGIL_API_KEYS"),
        ("tenant_keys", {"tiny": "acme"}, "VIGIL_TENANT_KEYS"),
        ("admin_keys", ["CHANGE-ME-admin-key-0123"], "VIGIL_ADMIN_KEYS"),
        ("webhook_secret", "CHANGE-ME-at-least-16-characters", "VIGIL_WEBHOOK_SECRET"),
        ("secret_key", "x" * 8, "VIGIL_SECRET_KEY"),
        (
            "database_url",
            "postgresql+psycopg://vigil:CHANGE-ME@postgres:5432/vigil",
            "VIGIL_DATABASE_URL",
        ),
    ],
)
def test_production_refuses_short_keys_and_placeholders(field, value, named):
    with pytest.raises(ConfigError, match=named):
        load_settings(env="production", **{**GOOD, field: value})


def test_the_manifest_placeholders_do_not_start():
    """deploy/vigil.yaml's Secret holds CHANGE-ME values: as shipped, it must not start."""
    import yaml

    documents = list(yaml.safe_load_all((ROOT / "deploy" / "vigil.yaml").read_text()))
    (secret,) = [d for d in documents if d and d.get("kind") == "Secret"]
    values = {k.removeprefix("VIGIL_").lower(): v for k, v in secret["stringData"].items()}
    assert values, "the manifest's Secret has VIGIL_* values"
    overrides = {k: (json.loads(v) if v[:1] in "[{" else v) for k, v in values.items()}
    with pytest.raises(ConfigError, match="placeholder"):
        load_settings(env="production", **overrides)
    filled = json.loads(json.dumps(overrides).replace("CHANGE-ME", "f1ll3d-w1th-a-r3al-s3cr3t"))
    assert load_settings(env="production", **filled).tenant_keys  # once filled in, it starts


def test_a_key_has_one_role():
    with pytest.raises(ConfigError, match="both"):
        load_settings(api_keys=["k" * 20], admin_keys=["k" * 20])
