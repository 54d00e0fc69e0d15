"""Schemathesis from the app's OpenAPI schema against the live server: positive and negative
cases for every operation, bounded in count (seeded, derandomized) and in generated tokens.
No 5xx, ever."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core import NotSet
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine

from serving.server.service.app import create_app

EXAMPLES = 15  # per operation and mode


@pytest.fixture(scope="module")
def server():
    s = make_settings()
    with ServerThread(create_app(s, engine=shared_engine(), log_traffic=False)) as srv:
        srv.model = s.model_name
        yield srv


def _bound(body, model: str):
    """Keep generated work tiny: cap tokens and samples; aim most bodies at the real model so
    they reach the engine rather than stopping at the model check."""
    if not isinstance(body, dict):
        return body
    body = dict(body)
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 2:
            body[key] = 2
    if "max_tokens" not in body and "max_completion_tokens" not in body:
        body["max_tokens"] = 2
    if isinstance(body.get("n"), int) and body["n"] > 2:
        body["n"] = 2
    if isinstance(body.get("model"), str):
        body["model"] = model
    return body


@pytest.mark.parametrize(
    "mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value
)
def test_no_server_errors_from_fuzzed_requests(server, mode):
    raw = server.app.openapi()  # /openapi.json is off by default
    schema = schemathesis.openapi.from_dict(raw)
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = sorted(op.label for op in operations)
    assert "POST /v1/chat/completions" in labels and "POST /v1/completions" in labels
    failures: list[str] = []
    statuses: dict[int, int] = {}

    for op in operations:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=op.as_strategy(generation_mode=mode))
        def run(case):
            if not isinstance(case.body, NotSet):
                case.body = _bound(case.body, server.model)
            response = case.call(
                base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60
            )
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code >= 500:
                failures.append(
                    f"{case.operation.label} {case.body!r} -> {response.status_code}"
                    f" {response.text[:300]}"
                )

        try:
            run()
        except Unsatisfiable:  # no negative case exists for an operation without inputs
            assert mode is GenerationMode.NEGATIVE and op.method.upper() == "GET", op.label
    assert not failures, "\n".join(failures[:5])
    assert sum(statuses.values()) >= EXAMPLES  # the fuzzer really sent requests
    if mode is GenerationMode.POSITIVE:
        assert statuses.get(200, 0) > 0  # and some of them generated text
    else:
        assert statuses.get(400, 0) > 0
