"""Outside input to the canaries: the probe file (validated, errors name the place) and the
engine's answers (anything malformed is a ProbeFailed naming the probe, never a crash)."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.canary.client import CanaryClient, EngineUnavailable, ProbeFailed
from sidecar.canary.probes import (
    DEFAULT_PROBES_PATH,
    MAX_PROBE_FILE_BYTES,
    ProbeSet,
    ProbeSetError,
    load_probe_set,
    parse_probe_set,
)
from vigil.internal import INTERNAL_HEADER

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=20,
)


def test_shipped_probe_set_covers_the_required_shapes():
    ps = load_probe_set()
    kinds = {p.kind for p in ps.probes}
    assert kinds == {"chat", "tokens", "perplexity"}
    token_lengths = [len(p.prompt_token_ids) for p in ps.probes if p.kind == "tokens"]
    assert max(token_lengths) > 16  # past one KV block (serving/engine/config.py block_size)
    longest_chat = max(len(p.messages[-1].content) for p in ps.probes if p.kind == "chat")
    assert longest_chat > 1500  # the long-context probe
    assert ps.version and ps.calibration.fillers


def test_missing_oversized_and_invalid_files_say_where(tmp_path):
    with pytest.raises(ProbeSetError, match="nope.json"):
        load_probe_set(tmp_path / "nope.json")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_PROBE_FILE_BYTES + 1))
    with pytest.raises(ProbeSetError, match="larger than"):
        load_probe_set(big)
    doc = json.loads(DEFAULT_PROBES_PATH.read_text())
    doc["probes"][1]["prompt_token_ids"] = []
    with pytest.raises(ProbeSetError, match=r"probes\.1"):
        parse_probe_set(json.dumps(doc))
    doc = json.loads(DEFAULT_PROBES_PATH.read_text())
    doc["probes"].append(dict(doc["probes"][0]))
    with pytest.raises(ProbeSetError, match="unique"):
        parse_probe_set(json.dumps(doc))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(json_values)
def test_any_json_is_a_probe_set_or_a_probe_set_error(value):
    try:
        result = parse_probe_set(json.dumps(value))
    except ProbeSetError as exc:
        assert str(exc)
    else:
        assert isinstance(result, ProbeSet)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.sampled_from(["version", "seed", "calibration", "probes"]), json_values)
def test_a_mutated_default_file_is_valid_or_refused_cleanly(field, value):
    doc = json.loads(DEFAULT_PROBES_PATH.read_text())
    doc[field] = value
    try:
        parsed = parse_probe_set(json.dumps(doc))
    except ProbeSetError as exc:
        assert field in str(exc)  # the message names the place at fault
    else:
        assert getattr(parsed, field) is not None


def _client(handler) -> CanaryClient:
    return CanaryClient(
        "http://engine", "m", api_key="k", seed=1, transport=httpx.MockTransport(handler)
    )


@settings(max_examples=200, deadline=None, derandomize=True)
@given(json_values, st.sampled_from([0, 1, 2]))
def test_malformed_engine_answers_are_probe_failures(answer, which):
    ps = load_probe_set()
    probe = [p for p in ps.probes if p.kind == ["chat", "tokens", "perplexity"][which]][0]
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get(INTERNAL_HEADER))
        return httpx.Response(200, json={"choices": [answer]} if which else answer)

    with _client(handler) as client, pytest.raises(ProbeFailed, match=probe.name):
        client.run(probe)
    assert seen == ["canary"]


def test_overload_and_refusal_are_told_apart():
    probe = load_probe_set().probes[0]
    with _client(lambda r: httpx.Response(503, text="busy")) as c, pytest.raises(EngineUnavailable):
        c.run(probe)
    with (
        _client(lambda r: httpx.Response(400, text="bad")) as c,
        pytest.raises(ProbeFailed, match="refused"),
    ):
        c.run(probe)

    def down(request):
        raise httpx.ConnectError("refused")

    with _client(down) as c, pytest.raises(EngineUnavailable):
        c.run(probe)
