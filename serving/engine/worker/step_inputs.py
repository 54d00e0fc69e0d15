"""The runner's typed view of one step: flattened token ids, positions, attention metadata and the
rows whose logits are sampled. Built from a `SchedulerOutput` on the host, then moved to device.

`build_step_inputs` rebuilds a step from the scheduled sequences alone, block tables included.
The runner builds with it for models whose layers use several KV-cache groups (the persistent
`InputBatch`, input_batch.py, keeps one group's tables), and it is the reference that
`InputBatch` must equal for one group (tests/serving/engine/worker/test_input_batch.py).
Host-to-device copies are non-blocking: from pageable memory the driver
stages the bytes before returning and never waits for the device, so the host can build step t+1
while step t runs (async scheduling).

With async scheduling a sequence's newest token may still be on the device (`pending`: sequence
-> index into the previous step's sampled ids): its row's id is a placeholder here, and the
runner fills `pending_rows` from that device tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from serving.attention.base import AttentionMetadata
from serving.engine.core.request import Sequence
from serving.engine.core.scheduler import ScheduledSeq


@dataclass
class StepInputs:
    input_ids: torch.Tensor  # int64 [num_tokens]
    positions: torch.Tensor  # int64 [num_tokens]
    meta: AttentionMetadata
    logits_rows: torch.Tensor  # int64 [num_samples]: hidden-state row of each sample
    sample_seqs: list[Sequence]  # who receives each sample (a row repeats for a fork's n samples)
    query_lens: list[int]
    seq_lens: list[int]
    # async scheduling: input rows whose id is taken from the previous step's sampled ids
    pending_rows: list[int] = field(default_factory=list)
    pending_src: list[int] = field(default_factory=list)
    # logits_rows is 0..num_tokens-1: one sample per row, in order (a decode step without a fork)
    samples_every_row: bool = False


def host_tensor(values: list[int], dtype: type[np.integer]) -> torch.Tensor:
    # via numpy: torch.tensor(list) costs ~0.2 us per element (~50 us for 256 ints), this ~4 us
    return torch.from_numpy(np.asarray(values, dtype=dtype))


def padded_tables(tables: list[list[int]]) -> torch.Tensor:
    """int32 [len(tables), longest], each row zero-padded."""
    width = max(len(t) for t in tables)
    out = np.zeros((len(tables), width), dtype=np.int32)
    for i, t in enumerate(tables):
        out[i, : len(t)] = t
    return torch.from_numpy(out)


def build_step_inputs(
    scheduled: list[ScheduledSeq],
    sample_targets: list[list[Sequence]],
    block_size: int,
    device: torch.device,
    pending: dict[Sequence, int] | None = None,
    num_groups: int = 1,
) -> StepInputs:
    """`sample_targets[i]`: the sequences sampled from scheduled[i]'s last row ([] for none).
    Sequences running one token (decodes) are laid out first, as the metadata contract asks.
    `num_groups` > 1: the metadata also carries each further KV-cache group's block tables and
    slots (`AttentionMetadata.group_tables`, from `Sequence.group_tables`)."""
    inputs = _build(scheduled, sample_targets, block_size, device, pending)
    if num_groups > 1:
        inputs.meta.group_tables = _group_tables(scheduled, inputs, block_size, device)
    return inputs


def _group_tables(
    scheduled: list[ScheduledSeq], inputs: StepInputs, block_size: int, device: torch.device
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    order = [i for i, s in enumerate(scheduled) if s.num_new_tokens == 1]
    order += [i for i, s in enumerate(scheduled) if s.num_new_tokens != 1]
    seqs = [scheduled[i].seq for i in order]
    positions = np.concatenate(
        [
            np.arange(s.num_computed_tokens, s.num_computed_tokens + q)
            for s, q in zip(seqs, inputs.query_lens, strict=True)
        ]
    )
    owner = np.repeat(np.arange(len(seqs)), inputs.query_lens)
    out = []
    groups = [s.group_tables or [] for s in seqs]  # set on every sequence past one group
    for g in range(len(groups[0])):
        tables = padded_tables([t[g].block_table for t in groups])
        block = tables.numpy()[owner, positions // block_size]
        slots = torch.from_numpy(block.astype(np.int64) * block_size + positions % block_size)
        out.append((tables.to(device, non_blocking=True), slots.to(device, non_blocking=True)))
    return out


def _build(
    scheduled: list[ScheduledSeq],
    sample_targets: list[list[Sequence]],
    block_size: int,
    device: torch.device,
    pending: dict[Sequence, int] | None,
) -> StepInputs:
    decodes = [i for i, item in enumerate(scheduled) if item.num_new_tokens == 1]
    num_decode = len(decodes)
    order = (
        decodes
        if num_decode == len(scheduled)
        else (decodes + [i for i, item in enumerate(scheduled) if item.num_new_tokens != 1])
    )
    input_ids: list[int] = []
    starts: list[int] = []
    qlens: list[int] = []
    rows: list[int] = []
    targets: list[Sequence] = []
    tables: list[list[int]] = []
    pending_rows: list[int] = []
    pending_src: list[int] = []
    num_tokens = 0
    for i in order:
        item = scheduled[i]
        seq, n = item.seq, item.num_new_tokens
        start = seq.num_computed_tokens
        if n == 1:
            input_ids.append(seq.token_ids[start])
        else:
            input_ids += seq.token_ids[start : start + n]
        starts.append(start)
        qlens.append(n)
        num_tokens += n
        if pending and seq in pending and start + n == len(seq.token_ids):  # last id on the device
            pending_rows.append(num_tokens - 1)
            pending_src.append(pending[seq])
        tables.append(seq.block_table)
        for target in sample_targets[i]:
            rows.append(num_tokens - 1)
            targets.append(target)
    slens = [s + q for s, q in zip(starts, qlens, strict=True)]
    block_tables = padded_tables(tables)
    if num_decode == len(order):
        return _decode_only(
            scheduled,
            order,
            input_ids,
            starts,
            slens,
            rows,
            block_tables,
            block_size,
            device,
            targets,
            pending_rows,
            pending_src,
        )
    # in numpy: on small arrays each torch CPU op costs ~10 us more (a step of 256 decode rows and a
    # prompt: ~95 us -> ~27 us for these lines on a small CPU host)
    q = np.asarray(qlens, dtype=np.int64)
    ends = np.cumsum(q)
    owner = np.repeat(np.arange(len(order)), q)
    positions_np = (
        np.asarray(starts, dtype=np.int64)[owner] + np.arange(num_tokens) - (ends - q)[owner]
    )
    qsl = torch.from_numpy(np.concatenate([[0], ends]).astype(np.int32))
    block = block_tables.numpy()[owner, positions_np // block_size]
    slots = torch.from_numpy(block.astype(np.int64) * block_size + positions_np % block_size)
    positions = torch.from_numpy(positions_np)
    meta = AttentionMetadata(
        query_start_loc=qsl.to(device, non_blocking=True),
        seq_lens=host_tensor(slens, np.int32).to(device, non_blocking=True),
        slot_mapping=slots.to(device, non_blocking=True),
        block_tables=block_tables.to(device, non_blocking=True),
        max_query_len=max(qlens),
        max_seq_len=max(slens),
        num_decode_tokens=num_decode,
        query_lens_cpu=qlens,
        seq_lens_cpu=slens,
    )
    return StepInputs(
        input_ids=host_tensor(input_ids, np.int64).to(device, non_blocking=True),
        positions=positions.to(device, non_blocking=True),
        meta=meta,
        logits_rows=host_tensor(rows, np.int64).to(device, non_blocking=True),
        sample_seqs=targets,
        query_lens=qlens,
        seq_lens=slens,
        pending_rows=pending_rows,
        pending_src=pending_src,
    )


def _decode_only(
    scheduled,
    order,
    input_ids,
    starts,
    slens,
    rows,
    block_tables,
    block_size,
    device,
    targets,
    pending_rows,
    pending_src,
) -> StepInputs:
    """One token per sequence at its start position (the steady state; batch 1 lives here): slots
    come from the block-table lists in Python, and every int64 vector travels in one host array and
    one copy (ids, positions, slots, sample rows), the int32 ones in another (query starts,
    lengths):
    three host-to-device copies a step instead of seven, and no tensor arithmetic on the host."""
    n = len(order)
    slots = []
    for i, start in zip(order, starts, strict=True):
        slots.append(
            scheduled[i].seq.block_table[start // block_size] * block_size + start % block_size
        )
    wide = host_tensor(input_ids + starts + slots + rows, np.int64).to(device, non_blocking=True)
    narrow = host_tensor(list(range(n + 1)) + slens, np.int32).to(device, non_blocking=True)
    qlens = [1] * n
    meta = AttentionMetadata(
        query_start_loc=narrow[: n + 1],
        seq_lens=narrow[n + 1 :],
        slot_mapping=wide[2 * n : 3 * n],
        block_tables=block_tables.to(device, non_blocking=True),
        max_query_len=1,
        max_seq_len=max(slens),
        num_decode_tokens=n,
        query_lens_cpu=qlens,
        seq_lens_cpu=slens,
    )
    return StepInputs(
        input_ids=wide[:n],
        positions=wide[n : 2 * n],
        meta=meta,
        logits_rows=wide[3 * n :],
        sample_seqs=targets,
        query_lens=qlens,
        seq_lens=slens,
        pending_rows=pending_rows,
        pending_src=pending_src,
        samples_every_row=rows == list(range(n)),
    )
