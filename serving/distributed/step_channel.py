"""The driver's per-step broadcast to the worker ranks, over the host (gloo) group.

Each message is a fixed int64 header (command and sizes) followed, for a step, by one int64
payload holding everything `build_step_inputs` produced: token ids, positions, slot mapping,
query start offsets, sequence lengths, block tables, the scheduler's copy-on-write block pairs and
the rows whose logits are sampled. Every rank (the driver too) unpacks the same payload and moves
it to its device in one copy, so all ranks run the very same step on their own KV heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from serving.attention.base import AttentionMetadata
from serving.distributed.context import ParallelContext

STEP, LOGITS, STOP = 1, 2, 3
HEADER_LEN = 10


@dataclass
class DeviceStep:
    input_ids: torch.Tensor
    positions: torch.Tensor
    meta: AttentionMetadata
    logits_rows: torch.Tensor
    copies: list[tuple[int, int]]  # (src, dst) KV blocks to copy before the forward

    @property
    def num_samples(self) -> int:
        return int(self.logits_rows.shape[0])


class StepChannel:
    def __init__(self, tp: ParallelContext, device: torch.device):
        self.tp = tp
        self.device = device
        self._header = torch.zeros(HEADER_LEN, dtype=torch.int64)

    def _broadcast(self, t: torch.Tensor, group) -> None:
        dist.broadcast(t, src=0, group=group)

    # ---- driver (rank 0) -------------------------------------------------------------------
    def send_step(self, inputs, copies: list[tuple[int, int]]) -> DeviceStep:
        """`inputs`: StepInputs built on the host. Returns the step as every rank sees it."""
        meta = inputs.meta
        n, s = int(inputs.input_ids.shape[0]), int(meta.seq_lens.shape[0])
        width = int(meta.block_tables.shape[1])
        flat_copies = torch.tensor(copies, dtype=torch.int64).reshape(-1)
        parts = [inputs.input_ids, inputs.positions, meta.slot_mapping, meta.query_start_loc,
                 meta.seq_lens, meta.block_tables.reshape(-1), flat_copies, inputs.logits_rows]
        payload = torch.cat([p.to(torch.int64) for p in parts])
        header = torch.tensor([STEP, n, s, width, meta.num_decode_tokens, meta.max_query_len,
                               meta.max_seq_len, len(copies), int(inputs.logits_rows.shape[0]), 0])
        self._broadcast(header, self.tp.cpu_group)
        self._broadcast(payload, self.tp.cpu_group)
        return self._unpack(header.tolist(), payload)

    def send_logits(self, hidden: torch.Tensor) -> None:
        """Announce an extra logits computation (prompt logprobs) over these hidden rows."""
        header = torch.zeros(HEADER_LEN, dtype=torch.int64)
        header[0], header[1] = LOGITS, hidden.shape[0]
        self._broadcast(header, self.tp.cpu_group)
        self._broadcast(hidden.contiguous(), self.tp.group)

    def send_stop(self) -> None:
        header = torch.zeros(HEADER_LEN, dtype=torch.int64)
        header[0] = STOP
        self._broadcast(header, self.tp.cpu_group)

    # ---- workers ---------------------------------------------------------------------------
    def receive(self, hidden_size: int, dtype: torch.dtype) -> tuple[int, DeviceStep | torch.Tensor | None]:
        """Block until the driver's next message: (STEP, DeviceStep), (LOGITS, hidden) or (STOP, None)."""
        header = self._header
        self._broadcast(header, self.tp.cpu_group)
        h = header.tolist()
        if h[0] == STEP:
            n, s, width, _, _, _, c, k = h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]
            payload = torch.empty(3 * n + 2 * s + 1 + s * width + 2 * c + k, dtype=torch.int64)
            self._broadcast(payload, self.tp.cpu_group)
            return STEP, self._unpack(h, payload)
        if h[0] == LOGITS:
            hidden = torch.empty(h[1], hidden_size, dtype=dtype, device=self.device)
            self._broadcast(hidden, self.tp.group)
            return LOGITS, hidden
        if h[0] == STOP:
            return STOP, None
        raise RuntimeError(f"tensor-parallel worker: unknown command {h[0]} from the driver")

    # ---- both ------------------------------------------------------------------------------
    def _unpack(self, h: list[int], payload: torch.Tensor) -> DeviceStep:
        n, s, width, num_decode, max_q, max_s, c, k = h[1:9]
        sizes = [n, n, n, s + 1, s, s * width, 2 * c, k]
        host = payload.split(sizes)
        dev = payload.to(self.device, non_blocking=True).split(sizes)
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
        return DeviceStep(dev[0], dev[1], meta, dev[7], copies)
