"""`vigil serve --api-server-count 2` when something else fails: an API process that dies ends the
whole group with a non-zero exit (for the service manager to restart it) and leaves no process
behind; with the database down, each process journals its own sampled requests under its own
file names, and each flushes them when it drains. And the core's routing of outputs to the
process that added each request."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter

import httpx
import pytest
from core_fixtures import tiny_model_dir
from multi_server_support import AUTH, MODEL, MultiServer, free_port, gone, served_by
from test_server_support import wait_for

from serving.engine.frontend.core_process import route
from serving.engine.frontend.messages import RequestDelta, RequestFailed


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory.mktemp("api-servers-failures-model"))


def test_a_dead_api_process_ends_the_group_with_a_failure_exit(tmp_path, model_dir):
    srv = MultiServer(tmp_path, model_dir, count=2)
    try:
        srv.wait_healthy()
        victim, survivor = srv.api_pids()
        pids = [srv.proc.pid, srv.core_pid(), survivor]
        os.kill(victim, signal.SIGKILL)
        assert srv.proc.wait(timeout=60) == 1, srv.log()
        assert "exited with code -9: stopping the group" in srv.log()
        assert wait_for(lambda: all(gone(p) for p in pids), timeout=15), [
            p for p in pids if not gone(p)
        ]
    finally:
        srv.stop()


def test_each_process_journals_its_own_samples_while_the_database_is_down(tmp_path, model_dir):
    down = f"postgresql://vigil@127.0.0.1:{free_port()}/vigil"  # nothing listens there
    srv = MultiServer(
        tmp_path, model_dir, count=2, VIGIL_SAMPLE_RATE="1.0", VIGIL_DATABASE_URL=down
    )
    try:
        srv.wait_healthy()
        served: Counter[int] = Counter()
        body = {"model": MODEL, "prompt": "journal me", "max_tokens": 3, "temperature": 0}
        while len(served) < 2 or sum(served.values()) < 6:
            assert sum(served.values()) < 30, served
            with httpx.Client(timeout=60) as client:
                r = client.post(srv.url + "/v1/completions", json=body, headers=AUTH)
            assert r.status_code == 200
            served[served_by(r)] += 1
        assert srv.stop() == 0, srv.log()
    finally:
        srv.stop()
    segments = sorted((tmp_path / "journal").glob("[0-9]*.jsonl"))
    lines_by_pid: Counter[int] = Counter()
    for path in segments:
        pid = int(path.name.split("-")[1])  # <time_ns>-<pid>-<seq>.jsonl
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert all(rec["response"] is not None for rec in records)
        lines_by_pid[pid] += len(records)
    assert lines_by_pid == served  # each process flushed exactly what it served, in its own files


def _delta(rid: str, finished: bool = False) -> RequestDelta:
    return RequestDelta(rid, [], finished)


def test_route_sends_each_output_to_the_process_that_added_the_request():
    owner = {"a": 0, "b": 1, "c": 1, "d": 0}
    routed = route(
        owner,
        [_delta("a"), _delta("b", finished=True), _delta("c")],
        [RequestFailed("d", "step failed", False)],
        n=2,
    )
    assert [[d.request_id for d in deltas] for deltas, _ in routed] == [["a"], ["b", "c"]]
    assert [[f.request_id for f in failed] for _, failed in routed] == [["d"], []]
    assert owner == {"a": 0, "c": 1}  # finished and failed requests are forgotten
    assert route(owner, [], [], n=3) == [([], []), ([], []), ([], [])]


def test_the_core_never_waits_on_an_api_process_that_left(tmp_path):
    """Stats go to every API process each step; one that drained and exited reads nothing, so
    once its queue is full those messages are dropped instead of stalling the others' streams."""
    import threading

    import zmq

    from serving.engine.frontend.core_process import CoreLoop
    from serving.engine.frontend.messages import Codec
    from serving.engine.frontend.token_deltas import TokenDeltaProcessor
    from serving.outputs import EngineStats

    class Engine:
        output = TokenDeltaProcessor([], 1024)

        def stats(self) -> EngineStats:
            return EngineStats()

    ctx = zmq.Context()
    reader = ctx.socket(zmq.PULL)
    reader.bind(f"ipc://{tmp_path}/alive")
    outboxes = [ctx.socket(zmq.PUSH) for _ in range(2)]
    outboxes[0].connect(f"ipc://{tmp_path}/alive")
    outboxes[1].connect(f"ipc://{tmp_path}/gone")  # nobody binds it any more
    loop = CoreLoop(Engine(), ctx.socket(zmq.PULL), outboxes, Codec(), os.getpid())
    loop.owner["r"] = 0
    steps = 3000  # past the default high-water mark of 1000 queued messages

    def run() -> None:
        for i in range(steps):
            loop._send(
                [_delta("r", finished=i == steps - 1)] if i % 2 == 0 or i == steps - 1 else [], []
            )

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    decode, deltas, last = Codec().from_core.decode, 0, False
    while not last:  # a live reader gets every delta (stats alone may be dropped if it lags)
        assert reader.poll(10_000), f"the core stalled after {deltas} deltas"
        msg = decode(reader.recv())
        deltas += len(msg.deltas)
        last = any(d.finished for d in msg.deltas)
    assert deltas == steps // 2 + 1
    worker.join(10)
    assert not worker.is_alive()
    for sock in (reader, *outboxes, loop.inbox):
        sock.close(linger=0)
    ctx.term()


def test_work_directories_of_killed_parents_are_removed(tmp_path):
    """A SIGKILLed parent cannot clean up its sockets and metric files; the next start removes
    the directories whose owner is gone and nothing else."""
    import subprocess
    import sys

    from serving.server.processes.multi_process import (
        OWNER_FILE,
        WORKDIR_PREFIX,
        remove_stale_workdirs,
    )

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()

    def workdir(name: str, owner: str | None) -> str:
        path = tmp_path / name
        (path / "metrics").mkdir(parents=True)
        if owner is not None:
            (path / OWNER_FILE).write_text(owner)
        return str(path)

    stale = workdir(WORKDIR_PREFIX + "stale", str(dead.pid))
    live = workdir(WORKDIR_PREFIX + "live", str(os.getpid()))
    unowned = workdir(WORKDIR_PREFIX + "unowned", None)
    garbled = workdir(WORKDIR_PREFIX + "garbled", "not a pid")
    other = workdir("something-else", str(dead.pid))
    assert remove_stale_workdirs(str(tmp_path)) == [stale]
    assert not os.path.exists(stale)
    assert all(os.path.isdir(p) for p in (live, unowned, garbled, other))


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes
