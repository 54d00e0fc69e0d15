"""A bounded fuzz run of POST /v1/ingest (schemathesis cases from the app's OpenAPI schema,
valid and invalid, sent over real HTTP to uvicorn on 127.0.0.1): never a 5xx, on SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from sidecar_servers import OPERATOR_KEY, UvicornThread

from sidecar.app import create_app
from storage.db import session_factory


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_ingest_fuzz_finds_no_5xx(migrated_db, make_settings, mode):
    # the schema the cases come from: served only with VIGIL_API_DOCS=true
    app = create_app(
        make_settings(migrated_db, ingest_max_bytes=200_000, api_docs=True),
        session_factory(migrated_db),
    )
    operation = schemathesis.openapi.from_asgi("/openapi.json", app)["/v1/ingest"]["POST"]
    seen: dict[int, int] = {}
    with UvicornThread(app) as server:

        @settings(max_examples=50, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case) -> None:
            response = case.call(
                base_url=server.url, headers={"Authorization": f"Bearer {OPERATOR_KEY}"}
            )
            seen[response.status_code] = seen.get(response.status_code, 0) + 1
            assert response.status_code < 500, (case.body, response.text[:500])
            if response.status_code >= 400:
                assert response.json()["detail"], response.text  # a message, not an empty error

        check()
    assert sum(seen.values()) >= 30
    if mode is GenerationMode.NEGATIVE:  # mutated bodies, headers (auth) and content types
        # schemathesis mutates the auth header too (401s); enough bodies must still reach validation
        rejected = sum(n for code, n in seen.items() if code in (400, 401, 413, 422))
        assert rejected > sum(seen.values()) / 2, seen
        assert seen.get(422, 0) >= 10, seen
