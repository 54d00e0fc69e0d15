"""The driver's per-step message to the worker ranks: one host message, through a shared-memory
ring (shm_ring.py; x86 hosts) or one gloo broadcast (host_broadcast.py).

A STEP message is a fixed int64 header (command and sizes) followed by everything
`build_step_inputs` produced: token ids, positions, slot mapping, query start offsets, sequence
lengths, block tables, the scheduler's copy-on-write block pairs, the rows whose logits are
sampled, and, under async scheduling, the input rows whose ids are the previous step's samples
(`pending_rows`) with their index in those samples (`pending_src`). Every rank (the driver too)
unpacks the same body and moves it to its device in one copy, so all ranks run the very same step
on their own KV heads. When the header's `share_samples` is set, the driver broadcasts the
step's sampled ids over the device group after sampling (`share_samples` / `receive_samples`):
the workers keep them on their device for the next step's pending rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from serving.attention.base import AttentionMetadata
from serving.distributed import shm_ring
from serving.distributed.context import ParallelContext
from serving.distributed.host_broadcast import DEFAULT_CAPACITY, HostBroadcast

if TYPE_CHECKING:  # the engine imports this module; its types are read for the checker only
    from serving.engine.worker.step_inputs import StepInputs

STEP, LOGITS, STOP = 1, 2, 3
HEADER_LEN = 12
STOP_WAIT_S = 5.0
_EMPTY = torch.zeros(0, dtype=torch.int64)


@dataclass
class DeviceStep:
    input_ids: torch.Tensor
    positions: torch.Tensor
    meta: AttentionMetadata
    logits_rows: torch.Tensor
    copies: list[tuple[int, int]]  # (src, dst) KV blocks to copy before the forward
    pending_rows: list[int]  # input rows taken from the previous step's sampled ids
    pending_src: list[int]  # ... at these indices of those ids
    pending_rows_dev: torch.Tensor  # the same two lists on the device
    pending_src_dev: torch.Tensor
    share_samples: bool  # the driver broadcasts this step's sampled ids after sampling

    @property
    def num_samples(self) -> int:
        return int(self.logits_rows.shape[0])


def _sizes(h: list[int]) -> list[int]:
    n, s, width, c, k, p = h[1], h[2], h[3], h[7], h[8], h[9]
    return [n, n, n, s + 1, s, s * width, 2 * c, k, p, p]


class StepChannel:
    def __init__(
        self,
        tp: ParallelContext,
        device: torch.device,
        capacity: int = DEFAULT_CAPACITY,
        transport: str = "auto",
    ):
        """Collective over the host group. `transport`: "shm", "gloo" or "auto" (shm where
        usable)."""
        self.tp = tp
        self.device = device
        self.host: shm_ring.ShmRing | HostBroadcast
        if transport == "auto":
            transport = "shm" if shm_ring.usable() else "gloo"
        if transport == "shm":
            self.host = shm_ring.ShmRing(tp.cpu_group, tp.rank, tp.world_size, capacity)
        elif transport == "gloo":
            self.host = HostBroadcast(tp.cpu_group, capacity)
        else:
            raise ValueError(f"unknown step channel transport {transport!r}")

    def close(self) -> None:
        self.host.close()

    # ---- driver (rank 0) -------------------------------------------------------------------
    def send_step(
        self, inputs: StepInputs, copies: list[tuple[int, int]], share_samples: bool = False
    ) -> DeviceStep:
        """`inputs`: StepInputs built on the host. Returns the step as every rank sees it."""
        meta = inputs.meta
        n, s = int(inputs.input_ids.shape[0]), int(meta.seq_lens.shape[0])
        width = int(meta.block_tables.shape[1])
        p = len(inputs.pending_rows)
        header = torch.tensor(
            [
                STEP,
                n,
                s,
                width,
                meta.num_decode_tokens,
                meta.max_query_len,
                meta.max_seq_len,
                len(copies),
                int(inputs.logits_rows.shape[0]),
                p,
                int(share_samples),
                0,
            ]
        )
        flat_copies = torch.tensor(copies, dtype=torch.int64).reshape(-1) if copies else _EMPTY
        pending = (
            torch.tensor(inputs.pending_rows + inputs.pending_src, dtype=torch.int64)
            if p
            else _EMPTY
        )
        parts = [
            header,
            inputs.input_ids,
            inputs.positions,
            meta.slot_mapping,
            meta.query_start_loc,
            meta.seq_lens,
            meta.block_tables.reshape(-1),
            flat_copies,
            inputs.logits_rows,
            pending,
        ]
        body = self.host.send(torch.cat([t.to(torch.int64) for t in parts]))
        return self._unpack(body)

    def send_logits(self, hidden: torch.Tensor) -> None:
        """Announce an extra logits computation (prompt logprobs) over these hidden rows."""
        header = torch.zeros(HEADER_LEN, dtype=torch.int64)
        header[0], header[1] = LOGITS, hidden.shape[0]
        self.host.send(header)
        dist.broadcast(hidden.contiguous(), src=0, group=self.tp.group)

    def send_stop(self) -> None:
        header = torch.zeros(HEADER_LEN, dtype=torch.int64)
        header[0] = STOP
        self.host.send(header, wait_s=STOP_WAIT_S)  # a stuck worker must not hold up the close

    def share_samples(self, token_ids: torch.Tensor) -> None:
        """This step's sampled ids (int64, on the device) to every worker; queued, not awaited."""
        # contiguous int64, as the workers allocate it (no copy when it already is)
        dist.broadcast(token_ids.to(torch.int64).contiguous(), src=0, group=self.tp.group)

    # ---- workers ---------------------------------------------------------------------------
    def receive(
        self, hidden_size: int, dtype: torch.dtype
    ) -> tuple[int, DeviceStep | torch.Tensor | None]:
        """Block until the driver's next message: (STEP, DeviceStep), (LOGITS, hidden) or (STOP,
        None)."""
        body = self.host.receive()
        cmd = int(body[0])
        if cmd == STEP:
            return STEP, self._unpack(body)
        if cmd == LOGITS:
            hidden = torch.empty(int(body[1]), hidden_size, dtype=dtype, device=self.device)
            dist.broadcast(hidden, src=0, group=self.tp.group)
            return LOGITS, hidden
        if cmd == STOP:
            return STOP, None
        raise RuntimeError(f"tensor-parallel worker: unknown command {cmd} from the driver")

    def receive_samples(self, count: int) -> torch.Tensor:
        ids = torch.empty(count, dtype=torch.int64, device=self.device)
        dist.broadcast(ids, src=0, group=self.tp.group)
        return ids

    # ---- both ------------------------------------------------------------------------------
    def _unpack(self, body: torch.Tensor) -> DeviceStep:
        h = body[:HEADER_LEN].tolist()
        n, s, width, num_decode, max_q, max_s = h[1:7]
        payload = body[HEADER_LEN:]
        sizes = _sizes(h)
        host = payload.split(sizes)
        dev = payload.to(self.device, non_blocking=True).split(sizes)  # the body is fresh: no reuse
        qsl_host, seq_lens_host, copies_host = host[3], host[4], host[6]
        meta = AttentionMetadata(
            query_start_loc=dev[3].to(torch.int32),
            seq_lens=dev[4].to(torch.int32),
            slot_mapping=dev[2],
            block_tables=dev[5].reshape(s, width).to(torch.int32),
            max_query_len=max_q,
            max_seq_len=max_s,
            num_decode_tokens=num_decode,
            query_lens_cpu=(qsl_host[1:] - qsl_host[:-1]).tolist(),
            seq_lens_cpu=seq_lens_host.tolist(),
        )
        pairs = copies_host.tolist()
        copies = list(zip(pairs[0::2], pairs[1::2], strict=True))
        return DeviceStep(
            dev[0],
            dev[1],
            meta,
            dev[7],
            copies,
            host[8].tolist(),
            host[9].tolist(),
            dev[8],
            dev[9],
            bool(h[10]),
        )
