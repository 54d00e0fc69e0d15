"""`VIGIL_API_SERVER_COUNT=auto` (the default): the count follows what the engine can produce
and what one API process streams, within the host's CPUs less the engine core's and the rest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.server.processes import api_server_count as asc
from serving.server.processes.api_server_count import (
    auto_api_server_count,
    resolve_api_server_count,
)
from vigil.cli.main import build_parser
from vigil.config import load_settings


def test_a_small_model_on_a_gpu_host_gets_enough_processes_for_its_streams():
    assert auto_api_server_count(cpus=16, on_gpu=True, max_num_seqs=64) == 2
    assert auto_api_server_count(cpus=16, on_gpu=True, max_num_seqs=256) == 3
    assert auto_api_server_count(cpus=16, on_gpu=True, max_num_seqs=8) == 1


def test_few_cpus_or_a_cpu_engine_keep_one_process():
    assert auto_api_server_count(cpus=2, on_gpu=True, max_num_seqs=256) == 1
    assert auto_api_server_count(cpus=4, on_gpu=True, max_num_seqs=256) == 2
    assert auto_api_server_count(cpus=64, on_gpu=False, max_num_seqs=256) == 1


@given(cpus=st.integers(1, 256), on_gpu=st.booleans(), seqs=st.integers(1, 4096))
def test_the_count_is_within_the_cpus_and_covers_the_demand(cpus, on_gpu, seqs):
    n = auto_api_server_count(cpus, on_gpu, seqs)
    assert 1 <= n <= max(1, cpus - asc.RESERVED_CPUS)
    demand = min(seqs * asc.STREAM_TOK_S, asc.ENGINE_PEAK_TOK_S) if on_gpu else 0
    if n < cpus - asc.RESERVED_CPUS:  # not capped by the CPUs: just enough processes
        assert n * asc.PER_PROCESS_TOK_S >= demand
        assert n == 1 or (n - 1) * asc.PER_PROCESS_TOK_S < demand


def test_settings_default_to_auto_and_resolve(monkeypatch):
    settings = load_settings()
    assert settings.api_server_count == "auto"
    monkeypatch.setattr(asc, "usable_cpus", lambda: 16)
    gpu = load_settings(device="cuda", max_num_seqs=256)
    assert resolve_api_server_count(gpu) == 3
    assert resolve_api_server_count(load_settings(device="cpu")) == 1
    inprocess = load_settings(device="cuda", engine_process="inprocess")
    assert resolve_api_server_count(inprocess) == 1
    assert resolve_api_server_count(load_settings(device="cuda", api_server_count=1)) == 1


@pytest.mark.parametrize(("arg", "want"), [("auto", "auto"), ("3", 3)])
def test_the_flag_and_the_environment_take_a_number_or_auto(monkeypatch, arg, want):
    assert build_parser().parse_args(["serve", "--api-server-count", arg]).api_server_count == want
    monkeypatch.setenv("VIGIL_API_SERVER_COUNT", arg)
    assert load_settings().api_server_count == want


def test_auto_with_the_engine_in_process_is_allowed_and_a_number_above_one_is_not():
    assert load_settings(engine_process="inprocess").api_server_count == "auto"
    with pytest.raises(Exception, match="needs VIGIL_ENGINE_PROCESS=separate"):
        load_settings(engine_process="inprocess", api_server_count=2)
