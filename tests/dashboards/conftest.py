"""Fixtures for the sidecar tests. Storage fixtures (`migrated_db`, ...) come from tests/conftest.py
and run every storage-touching test on SQLite AND PostgreSQL."""

from __future__ import annotations

import os

import pytest
from sidecar_servers import API_KEY

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")



@pytest.fixture
def make_settings(tmp_path):
    """settings(database_url, **overrides) with a private report dir and a test API key."""
    from vigil.config import load_settings

    def build(database_url: str, **overrides):
        values = {
            "database_url": database_url,
            "report_dir": tmp_path / "reports",
            "journal_dir": tmp_path / "journal",
            "api_keys": [API_KEY],
            "public_url": "http://127.0.0.1:8001",
        }
        values.update(overrides)
        return load_settings(**values)

    return build


@pytest.fixture(scope="session")
def embedder():
    """The MiniLM embedder, loaded once per test session, on one thread (shared 2-core box)."""
    import torch

    torch.set_num_threads(1)
    from dashboards.embedder import get_embedder

    return get_embedder()
