"""The step channel round-trips any step from the driver to a worker (2 processes, over the
shared-memory ring and over one gloo broadcast): the worker unpacks exactly what the driver
sent, whatever the sizes: no copies or many, wide block tables, pending rows, and bodies over
the capacity (the spill broadcast)."""

from __future__ import annotations

import multiprocessing as mp
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serving.attention.base import AttentionMetadata
from serving.distributed import shm_ring
from serving.distributed.context import ParallelContext
from serving.distributed.group import free_port
from serving.distributed.step_channel import LOGITS, STEP, STOP, StepChannel

CAPACITY = 512  # small, so many examples spill
HIDDEN = 8


def _plain(step) -> dict:
    m = step.meta
    return {
        "ids": step.input_ids.tolist(),
        "pos": step.positions.tolist(),
        "slots": m.slot_mapping.tolist(),
        "qsl": m.query_start_loc.tolist(),
        "seq_lens": m.seq_lens.tolist(),
        "tables": m.block_tables.tolist(),
        "meta": (
            m.max_query_len,
            m.max_seq_len,
            m.num_decode_tokens,
            m.query_lens_cpu,
            m.seq_lens_cpu,
        ),
        "rows": step.logits_rows.tolist(),
        "copies": step.copies,
        "pending": (step.pending_rows, step.pending_src),
        "pending_dev": (step.pending_rows_dev.tolist(), step.pending_src_dev.tolist()),
        "share": step.share_samples,
    }


def _worker(port: int, conn, transport: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2)
    tp = ParallelContext(1, 2, dist.group.WORLD, dist.new_group(backend="gloo"))
    channel = StepChannel(tp, torch.device("cpu"), capacity=CAPACITY, transport=transport)
    while True:
        cmd, payload = channel.receive(HIDDEN, torch.float32)
        if cmd == STEP:
            conn.send(("step", _plain(payload)))
            if payload.share_samples and payload.num_samples:
                conn.send(("samples", channel.receive_samples(payload.num_samples).tolist()))
        elif cmd == LOGITS:
            conn.send(("logits", payload.tolist()))
        elif cmd == STOP:
            conn.send(("stop", None))
            break
    channel.close()
    dist.destroy_process_group()


@pytest.fixture(scope="module", params=["shm", "gloo"])
def channel(request):
    transport = request.param
    if transport == "shm" and not shm_ring.usable():
        pytest.skip("the shared-memory ring needs x86")
    port = free_port()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_worker, args=(port, child, transport), daemon=True)
    proc.start()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2)
    try:
        tp = ParallelContext(0, 2, dist.group.WORLD, dist.new_group(backend="gloo"))
        chan = StepChannel(tp, torch.device("cpu"), capacity=CAPACITY, transport=transport)
        yield chan, parent
        chan.send_stop()
        assert parent.recv() == ("stop", None)
        proc.join(10)
        assert proc.exitcode == 0
        chan.close()
    finally:
        dist.destroy_process_group()
        if proc.is_alive():
            proc.kill()


@st.composite
def steps(draw):
    s = draw(st.integers(1, 24))
    qlens = draw(st.lists(st.integers(1, 9), min_size=s, max_size=s))
    n = sum(qlens)
    width = draw(st.sampled_from([1, 3, 16, 64, 200]))
    ints = st.integers(-1, 2**40)
    qsl = [0]
    for q in qlens:
        qsl.append(qsl[-1] + q)
    seq_lens = draw(st.lists(st.integers(1, 5000), min_size=s, max_size=s))
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        slot_mapping=torch.tensor(draw(st.lists(ints, min_size=n, max_size=n))),
        block_tables=torch.randint(
            0,
            2**31 - 1,
            (s, width),
            dtype=torch.int32,
            generator=torch.Generator().manual_seed(draw(st.integers(0, 99))),
        ),
        max_query_len=max(qlens),
        max_seq_len=max(seq_lens),
        num_decode_tokens=draw(st.integers(0, s)),
    )
    k = draw(st.integers(0, 2 * s))
    p = draw(st.integers(0, n))
    inputs = SimpleNamespace(
        input_ids=torch.tensor(draw(st.lists(st.integers(0, 300_000), min_size=n, max_size=n))),
        positions=torch.tensor(draw(st.lists(st.integers(0, 2**31), min_size=n, max_size=n))),
        meta=meta,
        logits_rows=torch.tensor(
            draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k)), dtype=torch.int64
        ),
        pending_rows=draw(st.lists(st.integers(0, n - 1), min_size=p, max_size=p)),
        pending_src=draw(st.lists(st.integers(0, 512), min_size=p, max_size=p)),
    )
    copies = draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=300))
    return inputs, copies, draw(st.booleans())


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(step=steps())
def test_any_step_round_trips(channel, step):
    chan, conn = channel
    inputs, copies, share = step
    sent = chan.send_step(inputs, copies, share_samples=share)
    kind, got = conn.recv()
    assert kind == "step"
    assert got == _plain(sent)
    m = inputs.meta
    assert got["ids"] == inputs.input_ids.tolist() and got["slots"] == m.slot_mapping.tolist()
    assert got["tables"] == m.block_tables.tolist() and got["qsl"] == m.query_start_loc.tolist()
    assert got["copies"] == [tuple(c) for c in copies] and got["pending"] == (
        inputs.pending_rows,
        inputs.pending_src,
    )
    assert got["rows"] == inputs.logits_rows.tolist() and got["share"] == share
    if share and sent.num_samples:
        ids = torch.arange(sent.num_samples, dtype=torch.int64) * 7 + 1
        chan.share_samples(ids)
        assert conn.recv() == ("samples", ids.tolist())


def test_small_and_spilled_bodies_and_logits(channel):
    chan, conn = channel
    before = chan.host.spills
    for s, width in ((1, 1), (40, 64)):  # 1 x 1 fits the buffer, 40 x 64 spills
        meta = AttentionMetadata(
            query_start_loc=torch.arange(s + 1, dtype=torch.int32),
            seq_lens=torch.full((s,), 5, dtype=torch.int32),
            slot_mapping=torch.arange(s),
            block_tables=torch.ones(s, width, dtype=torch.int32),
            max_query_len=1,
            max_seq_len=5,
            num_decode_tokens=s,
        )
        inputs = SimpleNamespace(
            input_ids=torch.arange(s),
            positions=torch.arange(s),
            meta=meta,
            logits_rows=torch.arange(s),
            pending_rows=[],
            pending_src=[],
        )
        sent = chan.send_step(inputs, [])
        assert conn.recv() == ("step", _plain(sent))
    assert chan.host.spills == before + 1
    hidden = torch.randn(3, HIDDEN)
    chan.send_logits(hidden)
    assert conn.recv() == ("logits", hidden.tolist())
