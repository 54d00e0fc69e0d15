"""Time per tensor-parallel step message, driver to one worker (2 processes on this host): the
old channel's two gloo broadcasts (header, then payload) against one fixed-capacity gloo broadcast
(serving/distributed/host_broadcast.py) and the shared-memory ring (shm_ring.py), all with the
same packing and unpacking, for a batch-1 and a batch-64 decode step.

    python -m bench.suites.bench_step_channel [--steps 2000] [--write]

Each figure is the driver's wall time per message over `--steps` messages, each sent only after
the worker acknowledged the previous one (a one-byte pipe message after it unpacked it), so it is
the latency of one message, not the rate of a pipelined stream; after a warm-up. The channels
run one after the other in the same processes.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from types import SimpleNamespace

import torch
import torch.distributed as dist

from bench.common.results_table import Table, write_results
from serving.attention.base import AttentionMetadata
from serving.distributed.context import ParallelContext
from serving.distributed.group import free_port
from serving.distributed.host_broadcast import HostBroadcast
from serving.distributed.step_channel import HEADER_LEN, STOP, StepChannel

OLD, NEW, SHM = "two broadcasts (old)", "one broadcast", "shm ring"
CASES = {"batch 1 decode": (1, 8), "batch 64 decode": (64, 64)}  # (sequences, block-table width)


class TwoBroadcasts(HostBroadcast):
    """The old transport: a fixed header broadcast carrying the length, then the body."""

    def send(self, body: torch.Tensor, wait_s: float | None = None) -> torch.Tensor:
        header = torch.zeros(HEADER_LEN, dtype=torch.int64)
        header[0] = body.shape[0]
        dist.broadcast(header, src=0, group=self.group)
        dist.broadcast(body.contiguous(), src=0, group=self.group)
        return body

    def receive(self) -> torch.Tensor:
        header = torch.zeros(HEADER_LEN, dtype=torch.int64)
        dist.broadcast(header, src=0, group=self.group)
        body = torch.empty(int(header[0]), dtype=torch.int64)
        dist.broadcast(body, src=0, group=self.group)
        return body


def decode_step(batch: int, width: int) -> SimpleNamespace:
    meta = AttentionMetadata(
        query_start_loc=torch.arange(batch + 1, dtype=torch.int32),
        seq_lens=torch.full((batch,), width * 16 - 3, dtype=torch.int32),
        slot_mapping=torch.arange(batch) * 16,
        block_tables=torch.arange(batch * width, dtype=torch.int32).reshape(batch, width),
        max_query_len=1,
        max_seq_len=width * 16 - 3,
        num_decode_tokens=batch,
    )
    return SimpleNamespace(
        input_ids=torch.arange(batch),
        positions=torch.arange(batch),
        meta=meta,
        logits_rows=torch.arange(batch),
        pending_rows=list(range(batch)),
        pending_src=list(range(batch)),
    )


def _channels(rank: int) -> dict[str, StepChannel]:
    tp = ParallelContext(rank, 2, dist.group.WORLD, dist.new_group(backend="gloo"))
    old = StepChannel(tp, torch.device("cpu"), transport="gloo")
    old.host = TwoBroadcasts(tp.cpu_group)
    return {
        OLD: old,
        NEW: StepChannel(tp, torch.device("cpu"), transport="gloo"),
        SHM: StepChannel(tp, torch.device("cpu"), transport="shm"),
    }


def _worker(port: int, ack) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2)
    for chan in _channels(1).values():
        while chan.receive(8, torch.float32)[0] != STOP:
            ack.send_bytes(b"k")
        chan.close()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument(
        "--write", action="store_true", help="add the table to bench/results/step_channel.md"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    port = free_port()
    ctx = mp.get_context("spawn")
    acks, ack = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(port, ack))
    proc.start()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2)
    results: dict[tuple[str, str], float] = {}
    for name, chan in _channels(0).items():
        for case, (batch, width) in CASES.items():
            inputs = decode_step(batch, width)
            for _ in range(100):
                chan.send_step(inputs, [])
                acks.recv_bytes()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                assert chan.send_step(inputs, []).meta.num_decode_tokens == batch
                acks.recv_bytes()
            results[(name, case)] = (time.perf_counter() - t0) / args.steps * 1e6
        chan.send_stop()
        chan.close()
    proc.join(30)
    dist.destroy_process_group()
    names = [OLD, NEW, SHM]
    table = Table(
        f"step message latency, driver to 1 worker, {args.steps} messages",
        ["step", *(f"{n} us" for n in names), "one broadcast / old", "shm ring / old"],
    )
    print(table.header())
    for case in CASES:
        old, new, shm = (results[(n, case)] for n in names)
        print(
            table.add(
                case,
                f"{old:.1f}",
                f"{new:.1f}",
                f"{shm:.1f}",
                f"{new / old:.2f}",
                f"{shm / old:.2f}",
            )
        )
    if args.write:
        write_results(
            "step_channel",
            [table],
            [
                "Each message waits for the worker's acknowledgement of the one before (a pipe "
                "message): "
                "the figures include that pipe round trip, the same for every channel.",
            ],
        )


if __name__ == "__main__":
    main()
