"""bench_serving's --api-server-count: `auto` by default, as `vigil serve`, resolved with the
server's own function, and shown in the tables as the setting with the count chosen."""

from __future__ import annotations

import sys

import httpx
import pytest

from bench.suites.bench_serving import _api_servers, parse_args
from bench.targets.serving_api_count import label, parse_counts, processes_answering, resolve
from serving.server.processes import api_server_count as asc


def test_auto_is_the_default_and_numbers_parse(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_serving"])
    assert parse_args().api_server_count == ["auto"]
    monkeypatch.setattr(sys, "argv", ["bench_serving", "--api-server-count", "auto,1,4"])
    assert parse_args().api_server_count == ["auto", "1", "4"]


@pytest.mark.parametrize("bad", ["0", "two", "auto,-1", ""])
def test_a_count_that_is_neither_a_number_nor_auto_is_refused(bad, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_serving", "--api-server-count", bad])
    with pytest.raises(SystemExit):
        parse_args()


def test_auto_resolves_as_the_server_resolves_it(monkeypatch):
    monkeypatch.setattr(asc, "usable_cpus", lambda: 16)
    assert resolve("auto", "separate", "cuda", 64) == 2
    assert resolve("auto", "separate", "cuda", 256) == 3
    assert resolve("auto", "inprocess", "cuda", 256) == 1  # API processes need a separate core
    assert resolve("auto", "separate", "cpu", 256) == 1
    monkeypatch.setattr(asc, "usable_cpus", lambda: 4)
    assert resolve("auto", "separate", "cuda", 256) == 2  # capped by the CPUs less two
    assert resolve("3", "separate", "cuda", 256) == 3


def test_the_table_shows_the_setting_and_the_count():
    assert label("auto", 3) == "auto (3)"
    assert label("2", 2) == "2"
    run = {"api_servers": 3, "api_server_setting": "auto", "api_processes_seen": 3}
    assert _api_servers(run) == "auto (3)"
    assert _api_servers({**run, "api_processes_seen": 2}) == "auto (3), 2 seen"
    assert _api_servers({"api_servers": 1}) == "1"  # a run recorded before the setting was kept
    assert parse_counts(" auto , 2") == ["auto", "2"]


class _Clients:
    """httpx.Client stand-in: each new client answers as the next of `pids` (None: no header)."""

    def __init__(self, pids: list[int | None]):
        self.pids, self.i = pids, 0

    def __call__(self):
        pid = self.pids[self.i % len(self.pids)]
        self.i += 1
        headers = {} if pid is None else {"x-vigil-api-server": f"{pid % 7}:{pid}"}
        transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=headers))
        return httpx.Client(transport=transport)


def test_processes_answering_counts_distinct_process_headers(monkeypatch):
    real = httpx.Client
    clients = _Clients([101, 102, 103, 101])
    monkeypatch.setattr(httpx, "Client", lambda **kw: clients() if not kw else real(**kw))
    assert processes_answering("http://127.0.0.1:1", tries=8) == 3
    clients.pids = [None]  # a lone API process sends no header
    assert processes_answering("http://127.0.0.1:1", tries=4) == 1
