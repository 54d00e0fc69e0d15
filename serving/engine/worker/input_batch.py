"""`InputBatch`: the runner's persistent step state. Each scheduled sequence keeps a row of one
int32 block-table array across steps (only the entries the block manager changed since the last
step are written: a decode writes one entry per block_size steps), and the step's tensors are
computed from per-step vectors with numpy, not assembled sequence by sequence.

What a step costs on the host is then a few list comprehensions over the scheduled sequences
(their start, token count, newest id, table length) plus a fixed number of array operations,
against a Python loop with a dozen operations per sequence when the step is rebuilt
(`step_inputs.build_step_inputs`, kept as the reference: the two give identical `StepInputs`,
which tests check over arrivals, finishes, preemptions, forks and chunked prefill).

Rows: a sequence holds its row while it is scheduled step after step; a sequence missing from a
step (finished, preempted, not scheduled for budget) gives its row back, and a sequence that
(re)enters gets a free row, written whole. The block manager lowers `Sequence.block_table_synced`
whenever it rewrites a table (copy-on-write, free, allocate): entries from there are rewritten.
Entries past a row's table are kept zero, so gathered rows are zero-padded as the kernels expect.
"""

from __future__ import annotations

from itertools import chain, repeat
from operator import attrgetter, getitem

import numpy as np
import torch

from serving.attention.base import AttentionMetadata
from serving.engine.core.request import Sequence
from serving.engine.core.scheduler import ScheduledSeq
from serving.engine.worker.step_inputs import StepInputs, host_tensor

_NUM_NEW, _SEQ = attrgetter("num_new_tokens"), attrgetter("seq")
_COMPUTED, _TOKENS = attrgetter("num_computed_tokens"), attrgetter("token_ids")
_TABLE, _SYNCED = attrgetter("block_table"), attrgetter("block_table_synced")


class InputBatch:
    def __init__(self, block_size: int, device: torch.device, rows: int = 64, blocks: int = 64):
        self.block_size = block_size
        self.device = device
        self.tables = np.zeros((rows, blocks), dtype=np.int32)
        self.row_len = np.zeros(rows, dtype=np.int64)  # entries valid in each row; zeros after
        self.row_of: dict[Sequence, int] = {}
        self.free_rows: list[int] = list(range(rows - 1, -1, -1))
        self.last_seqs: list[Sequence] = []  # the last step's sequences and their rows
        self.last_rows = np.zeros(0, dtype=np.int64)

    # ---- rows ------------------------------------------------------------------------------
    def _grow(self, rows: int, blocks: int) -> None:
        r, b = self.tables.shape
        new_r, new_b = max(r, rows), max(b, blocks)
        if (new_r, new_b) == (r, b):
            return
        new_r = max(new_r, 2 * r) if new_r > r else r
        new_b = max(new_b, 2 * b) if new_b > b else b
        tables = np.zeros((new_r, new_b), dtype=np.int32)
        tables[:r, :b] = self.tables
        self.tables = tables
        self.row_len = np.concatenate([self.row_len, np.zeros(new_r - r, dtype=np.int64)])
        self.free_rows = list(range(new_r - 1, r - 1, -1)) + self.free_rows

    def _rows_for(self, seqs: list[Sequence]) -> np.ndarray:
        """Each sequence's row: kept when it was in the last step, else a free one; rows of
        sequences not in this step go back first."""
        row_of = self.row_of
        if seqs == self.last_seqs:
            return self.last_rows
        if len(row_of) != len(seqs) or any(s not in row_of for s in seqs):
            kept = {s: row_of[s] for s in seqs if s in row_of}
            self.free_rows += [r for s, r in row_of.items() if s not in kept]
            self._grow(len(seqs), 0)
            for s in seqs:
                if s not in kept:
                    kept[s] = self.free_rows.pop()
                    s.block_table_synced = 0  # a row it did not hold before: written whole
            self.row_of = row_of = kept
        self.last_seqs = seqs
        self.last_rows = np.fromiter((row_of[s] for s in seqs), np.int64, len(seqs))
        return self.last_rows

    def _sync(self, seqs: list[Sequence], rows: np.ndarray) -> int:
        """Write the table entries each sequence's row lacks (from `block_table_synced`, which a
        row's new holder and the block manager's rewrites lower); zero what lies past its
        table. Returns the longest table's length."""
        stale = [i for i, s in enumerate(seqs) if s.block_table_synced != len(s.block_table)]
        if stale:
            self._grow(0, max(len(seqs[i].block_table) for i in stale))
            tables, row_len = self.tables, self.row_len
            for i in stale:
                s, r = seqs[i], int(rows[i])
                length = len(s.block_table)
                start = min(s.block_table_synced, length)
                tables[r, start:length] = s.block_table[start:length]
                if row_len[r] > length:
                    tables[r, length : row_len[r]] = 0
                row_len[r] = length
                s.block_table_synced = length
        return int(self.row_len[rows].max())

    # ---- the step --------------------------------------------------------------------------
    def build(
        self,
        scheduled: list[ScheduledSeq],
        sample_targets: list[list[Sequence]],
        pending: dict[Sequence, int] | None = None,
    ) -> StepInputs:
        """The same `StepInputs` as `build_step_inputs(scheduled, sample_targets, block_size,
        device, pending)`: decode rows (one token) first, in scheduled order, then the rest."""
        counts = list(map(_NUM_NEW, scheduled))
        if max(counts) == 1:
            order = scheduled
            targets_in_order = sample_targets
        else:
            idx = [i for i, c in enumerate(counts) if c == 1]
            idx += [i for i, c in enumerate(counts) if c != 1]
            order = [scheduled[i] for i in idx]
            counts = [counts[i] for i in idx]
            targets_in_order = [sample_targets[i] for i in idx]
        seqs = list(map(_SEQ, order))
        starts = list(map(_COMPUTED, seqs))
        n_seqs = len(seqs)
        rows = self._rows_for(seqs)
        width = self._sync(seqs, rows)
        num_decode = counts.count(1)
        decode_only = num_decode == n_seqs
        token_lists = list(map(_TOKENS, seqs))
        input_ids: list[int]
        if decode_only:
            input_ids = list(map(getitem, token_lists, starts))
        else:
            input_ids = []
            for t, p, c in zip(token_lists, starts, counts, strict=True):
                input_ids += t[p : p + c]
        q = np.asarray(counts, dtype=np.int64)
        ends = np.cumsum(q)
        num_tokens = int(ends[-1])
        start_np = np.asarray(starts, dtype=np.int64)
        if decode_only:
            positions = start_np
            row_of_token = rows
        else:
            owner = np.repeat(np.arange(n_seqs), q)
            positions = start_np[owner] + np.arange(num_tokens) - (ends - q)[owner]
            row_of_token = rows[owner]
        bs = self.block_size
        slots = self.tables[row_of_token, positions // bs].astype(np.int64) * bs + positions % bs
        block_tables = torch.from_numpy(self.tables[rows, :width])
        slens_np = start_np + q
        per_row = list(map(len, targets_in_order))
        sample_seqs = list(chain.from_iterable(targets_in_order))
        every_row = decode_only and len(sample_seqs) == n_seqs and per_row.count(1) == n_seqs
        logits_rows = np.arange(n_seqs) if every_row else np.repeat(ends - 1, per_row)
        pending_rows: list[int] = []
        pending_src: list[int] = []
        if pending and decode_only and len(pending) == n_seqs and list(pending) == seqs:
            # every row was sampled in the last launch, in this order, and is one token on:
            # each newest id is that step's sample (the steady state of async scheduling)
            pending_rows = list(range(n_seqs))
            pending_src = list(pending.values())
        elif pending:  # rows whose newest id is still on the device
            src = np.fromiter(map(pending.get, seqs, repeat(-1, n_seqs)), np.int64, n_seqs)
            ntok = np.fromiter(map(len, token_lists), np.int64, n_seqs)
            on_device = (src >= 0) & (slens_np == ntok)
            pending_rows = (ends - 1)[on_device].tolist()
            pending_src = src[on_device].tolist()
        slens = slens_np.tolist()
        max_seq_len = max(slens)
        if decode_only:  # one int64 and one int32 host array, two copies (the steady state)
            wide = np.concatenate([input_ids, positions, slots, logits_rows], dtype=np.int64)
            narrow = np.concatenate([np.arange(n_seqs + 1), slens_np]).astype(np.int32)
            wide_d = torch.from_numpy(wide).to(self.device, non_blocking=True)
            narrow_d = torch.from_numpy(narrow).to(self.device, non_blocking=True)
            n = n_seqs
            meta = AttentionMetadata(
                query_start_loc=narrow_d[: n + 1],
                seq_lens=narrow_d[n + 1 :],
                slot_mapping=wide_d[2 * n : 3 * n],
                block_tables=block_tables.to(self.device, non_blocking=True),
                max_query_len=1,
                max_seq_len=max_seq_len,
                num_decode_tokens=n,
                query_lens_cpu=counts,
                seq_lens_cpu=slens,
            )
            return StepInputs(
                input_ids=wide_d[:n],
                positions=wide_d[n : 2 * n],
                meta=meta,
                logits_rows=wide_d[3 * n :],
                sample_seqs=sample_seqs,
                query_lens=counts,
                seq_lens=slens,
                pending_rows=pending_rows,
                pending_src=pending_src,
                samples_every_row=every_row,
            )
        dev = self.device
        qsl = np.concatenate([[0], ends]).astype(np.int32)
        meta = AttentionMetadata(
            query_start_loc=torch.from_numpy(qsl).to(dev, non_blocking=True),
            seq_lens=torch.from_numpy(slens_np.astype(np.int32)).to(dev, non_blocking=True),
            slot_mapping=torch.from_numpy(slots).to(dev, non_blocking=True),
            block_tables=block_tables.to(dev, non_blocking=True),
            max_query_len=max(counts),
            max_seq_len=max_seq_len,
            num_decode_tokens=num_decode,
            query_lens_cpu=counts,
            seq_lens_cpu=slens,
        )
        return StepInputs(
            input_ids=host_tensor(input_ids, np.int64).to(dev, non_blocking=True),
            positions=torch.from_numpy(positions).to(dev, non_blocking=True),
            meta=meta,
            logits_rows=torch.from_numpy(logits_rows).to(dev, non_blocking=True),
            sample_seqs=sample_seqs,
            query_lens=counts,
            seq_lens=slens,
            pending_rows=pending_rows,
            pending_src=pending_src,
        )
