"""The front-ends' seams: all three front-ends offer every `EngineClient` member with the
Protocol's parameters, their stats come from one `StatsMirror`, and `CoreSupervisor` drives its
owner through `CoreOwner` alone."""

from __future__ import annotations

import inspect
import multiprocessing
import threading
import time

import pytest

from serving.engine.config import EngineConfig
from serving.engine.frontend.async_engine import AsyncLLMEngine
from serving.engine.frontend.attached_client import AttachedCoreClient, CoreAttachment
from serving.engine.frontend.client import EngineClient
from serving.engine.frontend.core_client import EngineCoreClient
from serving.engine.frontend.core_host import CoreHost
from serving.engine.frontend.stats_mirror import StatsMirror
from serving.engine.frontend.supervisor import CoreOwner, CoreSupervisor
from serving.outputs import EngineStats

FRONT_ENDS = [AsyncLLMEngine, EngineCoreClient, AttachedCoreClient]


def _members(protocol: type) -> dict[str, object]:
    names = {n for n in vars(protocol) if not n.startswith("_")}
    names |= set(getattr(protocol, "__annotations__", {}))
    return {n: inspect.getattr_static(protocol, n, None) for n in names}


def _params(fn) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


class _Engine:  # what AsyncLLMEngine reads of its LLMEngine before it starts
    tokenizer = None
    max_model_len = 0

    def stats(self) -> EngineStats:
        return EngineStats()


def _front_end(cls: type):
    if cls is AsyncLLMEngine:
        return AsyncLLMEngine(_Engine())  # type: ignore[arg-type]
    config = EngineConfig(device="cpu")
    if cls is AttachedCoreClient:
        return AttachedCoreClient(
            config, CoreAttachment(0, "ipc://in", "ipc://out", "ipc://events")
        )
    return EngineCoreClient(config)


@pytest.mark.parametrize("cls", FRONT_ENDS, ids=lambda c: c.__name__)
def test_every_front_end_offers_the_whole_engine_client_surface(cls):
    client = _front_end(cls)
    assert isinstance(client, EngineClient)  # every member present, data members included
    for name, member in _members(EngineClient).items():
        impl = inspect.getattr_static(cls, name, None)
        if callable(member) and not isinstance(member, property):
            assert _params(impl) == _params(member), f"{cls.__name__}.{name}: other parameters"
            assert inspect.iscoroutinefunction(impl) == inspect.iscoroutinefunction(member), name
    assert inspect.isasyncgenfunction(cls.generate)


def test_both_core_owners_offer_what_the_supervisor_calls(tmp_path):
    host = CoreHost(EngineConfig(device="cpu"), [], [], str(tmp_path))
    try:
        for owner in (EngineCoreClient(EngineConfig(device="cpu")), host):
            for name, member in _members(CoreOwner).items():
                assert hasattr(owner, name), f"{type(owner).__name__}.{name} missing"
                if callable(member) and not isinstance(member, property):
                    assert _params(getattr(type(owner), name)) == _params(member), name
            assert owner.core is None and owner.closing is False
    finally:
        host.shutdown(timeout_s=0)


def test_queued_adds_count_as_waiting_until_a_snapshot_counts_them():
    mirror = StatsMirror(EngineStats(num_waiting=2, num_running=3))
    mirror.adds_sent += 4
    assert (
        mirror.num_waiting() == 6 and mirror.stats().num_waiting == 6 and mirror.num_running() == 3
    )
    mirror.snapshot, mirror.adds_seen = EngineStats(num_waiting=5, num_running=3), 3
    assert mirror.num_waiting() == 6
    mirror.stats().num_waiting = 100  # a copy: the reader cannot change the mirror
    assert mirror.snapshot.num_waiting == 5
    mirror.adds_seen = 9  # a snapshot may count adds this mirror has not sent yet: never negative
    assert mirror.num_waiting() == 5
    mirror.restart()
    assert (mirror.adds_sent, mirror.adds_seen, mirror.num_waiting()) == (0, 0, 5)


class _Core:
    def __init__(self, process):
        self.process = process

    @property
    def pid(self):
        return self.process.pid


class _Owner:
    """A CoreOwner whose cores are processes that exit at once (a crash, to the supervisor)."""

    def __init__(self, restarts_wanted: int):
        self.auto_restart = True
        self.closing = False
        self.deaths: list[int | None] = []
        self.launches = 0
        self._wanted = restarts_wanted
        self._ctx = multiprocessing.get_context("fork")
        self.core = self._spawn()
        self.done = threading.Event()

    def _spawn(self) -> _Core:
        process = self._ctx.Process(target=time.sleep, args=(0,), daemon=True)
        process.start()
        return _Core(process)

    @property
    def core_pid(self):
        return self.core.pid if self.core is not None else None

    def launch_core(self) -> None:
        self.launches += 1
        if self.launches == 1:
            raise RuntimeError("the first restart fails to load")  # retried with backoff
        self.core = self._spawn()
        if self.launches - 1 >= self._wanted:
            self.closing = True  # enough: the next exit is expected
            self.done.set()

    def on_core_death(self, core) -> None:
        self.deaths.append(core.pid)


def test_the_supervisor_restarts_a_dead_core_through_the_core_owner_protocol():
    owner = _Owner(restarts_wanted=2)
    supervisor = CoreSupervisor(owner)
    events: list[bool] = []
    supervisor.listeners.append(events.append)
    first = owner.core_pid
    supervisor.start()
    assert owner.done.wait(30), (owner.launches, owner.deaths)
    supervisor.join(10)
    assert owner.deaths[0] == first and len(owner.deaths) == 2
    assert owner.launches == 3 and supervisor.restarts == 2
    assert events == [True, True]  # "up" after each restart; "down" is the owner's to announce
