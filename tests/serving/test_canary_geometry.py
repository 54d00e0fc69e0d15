"""Engine canaries per attention geometry: a tiny Gemma 4 (sliding layers 16 wide with two KV
heads, full layers 32 wide with one, window 8) served over HTTP, its canary baseline calibrated by
the sidecar's own client and calibration, and a probe longer than the window. A deliberately wrong
attention for the full layers only (a layer's scale off by 25 %, the test-only switch in
serving/attention/fault.py) fails the canary run; so does one for a sliding layer; the healthy
engine passes."""

from __future__ import annotations

import httpx
import pytest
import torch
from engine_fixtures import TINY_WINDOW, save_tiny_model
from test_server_support import API_KEY, ServerThread, make_settings, wait_for

from drift.detectors.canary import compare, judge
from serving.attention.fault import set_scale_fault
from serving.server.service.app import create_app
from sidecar.canary.calibration import calibrate
from sidecar.canary.client import CanaryClient
from sidecar.canary.probes import ProbeSet

LONG = [(7 * i + 3) % 256 for i in range(3 * TINY_WINDOW)]  # past the window: both layer kinds
PROBES = ProbeSet(
    version="geometry-1",
    seed=3,
    calibration={"repeats": 2, "fillers": [], "filler_copies": 0},
    probes=[
        {"name": "past-window", "kind": "tokens", "max_tokens": 12, "prompt_token_ids": LONG},
        {"name": "short", "kind": "tokens", "max_tokens": 8, "prompt_token_ids": LONG[:5]},
    ],
)


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("m") / "tiny-gemma4"
    path.mkdir()
    save_tiny_model("gemma4_text", path, seed=5)
    settings = make_settings(
        model_path=str(path), engine_process="inprocess", device="cpu", block_size=4
    )
    with ServerThread(create_app(settings, log_traffic=False)) as srv:
        ready = lambda: httpx.get(srv.url + "/health", timeout=5).status_code == 200  # noqa: E731
        assert wait_for(ready, timeout=120)
        with CanaryClient(srv.url, path.name, api_key=API_KEY, seed=PROBES.seed) as client:
            baseline = calibrate(client.run, client.filler, PROBES)
            yield client, baseline
    set_scale_fault(None)


def _failed(client, baseline) -> list[str]:
    failed = []
    for probe in PROBES.probes:
        verdict = judge(
            compare(baseline.expected[probe.name], client.run(probe)),
            baseline.tolerances[probe.name],
        )
        if not verdict.ok:
            failed.append(probe.name)
    return failed


@pytest.mark.parametrize(("layer", "kind"), [(1, "full"), (3, "full"), (0, "sliding")])
def test_a_wrong_attention_for_one_kind_of_layer_fails_the_canaries(canary, layer, kind):
    client, baseline = canary
    assert _failed(client, baseline) == []  # healthy
    set_scale_fault(layer, 1.25)
    try:
        failed = _failed(client, baseline)
    finally:
        set_scale_fault(None)
    assert "past-window" in failed, (layer, kind)
    assert _failed(client, baseline) == []
