"""The runner's typed view of one step: flattened token ids, positions, attention metadata and the
rows whose logits are sampled. Built from a `SchedulerOutput` on the host, then moved to device."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from serving.attention.base import AttentionMetadata
from serving.engine.request import Sequence
from serving.engine.scheduler import ScheduledSeq


@dataclass
class StepInputs:
    input_ids: torch.Tensor  # int64 [num_tokens]
    positions: torch.Tensor  # int64 [num_tokens]
    meta: AttentionMetadata
    logits_rows: torch.Tensor  # int64 [num_samples]: hidden-state row of each sample
    sample_seqs: list[Sequence]  # who receives each sample (a row repeats for a fork's n samples)
    query_lens: list[int]
    seq_lens: list[int]


def build_step_inputs(
    scheduled: list[ScheduledSeq],
    sample_targets: list[list[Sequence]],
    block_size: int,
    device: torch.device,
) -> StepInputs:
    """`sample_targets[i]`: the sequences sampled from scheduled[i]'s last row ([] for none).
    Sequences running one token (decodes) are laid out first, as the metadata contract asks."""
    order = sorted(range(len(scheduled)), key=lambda i: scheduled[i].num_new_tokens != 1)
    input_ids: list[int] = []
    positions: list[int] = []
    slots: list[int] = []
    qlens: list[int] = []
    slens: list[int] = []
    rows: list[int] = []
    targets: list[Sequence] = []
    tables: list[list[int]] = []
    for i in order:
        item = scheduled[i]
        seq, start = item.seq, item.seq.num_computed_tokens
        end = start + item.num_new_tokens
        input_ids += seq.token_ids[start:end]
        positions += range(start, end)
        table = seq.block_table
        slots += [table[p // block_size] * block_size + p % block_size for p in range(start, end)]
        qlens.append(item.num_new_tokens)
        slens.append(end)
        tables.append(table)
        for target in sample_targets[i]:
            rows.append(len(input_ids) - 1)
            targets.append(target)
    width = max(len(t) for t in tables)
    block_tables = torch.zeros(len(tables), width, dtype=torch.int32)
    for r, table in enumerate(tables):
        block_tables[r, : len(table)] = torch.tensor(table, dtype=torch.int32)
    qsl = [0]
    for q in qlens:
        qsl.append(qsl[-1] + q)
    num_decode = 0
    while num_decode < len(qlens) and qlens[num_decode] == 1:
        num_decode += 1
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(slens, dtype=torch.int32, device=device),
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        block_tables=block_tables.to(device),
        max_query_len=max(qlens),
        max_seq_len=max(slens),
        num_decode_tokens=num_decode,
        query_lens_cpu=qlens,
        seq_lens_cpu=slens,
    )
    return StepInputs(
        input_ids=torch.tensor(input_ids, dtype=torch.int64, device=device),
        positions=torch.tensor(positions, dtype=torch.int64, device=device),
        meta=meta,
        logits_rows=torch.tensor(rows, dtype=torch.int64, device=device),
        sample_seqs=targets,
        query_lens=qlens,
        seq_lens=slens,
    )
