"""The engine's O(1)-per-sequence host path: ListPrefix snapshots in running outputs, running
logprob/entropy sums, the persistent batch's block-table rows (checked against a from-the-lists
rebuild of every step's tensors, through copy-on-write forks, preemption and chunked prefill),
and the runner passing token history to the sampler only for penalised rows."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import make_engine, save_tiny_model

from serving.engine.worker.input_batch import InputBatch
from serving.engine.worker.token_sampler import sample
from serving.loader import load_model_files
from serving.outputs import ListPrefix
from serving.sampling_params import SamplingParams


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_host")
    save_tiny_model("llama", path, seed=11)
    return load_model_files(path)


def test_list_prefix_is_a_frozen_snapshot():
    items = [1, 2, 3, 4]
    view = ListPrefix(items, 1)
    items += [5, 6]  # later appends are invisible
    assert len(view) == 3 and view == [2, 3, 4] and view != [2, 3, 4, 5]
    assert [2, 3, 4] == view  # noqa: SIM300  (the reflected comparison, list on the left)
    assert list(view) == [2, 3, 4] and view[0] == 2 and view[-1] == 4 and view[1:] == [3, 4]
    assert view[5:] == [] and bool(ListPrefix(items, 6)) is False
    with pytest.raises(IndexError):
        view[3]
    with pytest.raises(IndexError):
        view[-4]


def _oracle(scheduled, targets, bs):
    """The step tensors rebuilt from the Python lists, one token at a time."""
    order = sorted(range(len(scheduled)), key=lambda i: scheduled[i].num_new_tokens != 1)
    ids, pos, slots, rows, tables = [], [], [], [], []
    for i in order:
        seq, n = scheduled[i].seq, scheduled[i].num_new_tokens
        start = seq.num_computed_tokens
        for p in range(start, start + n):
            ids.append(seq.token_ids[p])
            pos.append(p)
            slots.append(seq.block_table[p // bs] * bs + p % bs)
        rows += [len(ids) - 1] * len(targets[i])
        tables.append(list(seq.block_table))
    width = max(len(t) for t in tables)
    return ids, pos, slots, rows, [t + [0] * (width - len(t)) for t in tables]


def test_step_tensors_match_a_rebuild_from_the_lists(tiny, monkeypatch):
    real = InputBatch.build
    checked = {"steps": 0, "cow": 0}

    def checking(self, scheduled, targets, pending=None):
        got = real(self, scheduled, targets, pending)
        ids, pos, slots, rows, tables = _oracle(scheduled, targets, self.block_size)
        assert got.input_ids.tolist() == ids and got.positions.tolist() == pos
        assert got.meta.slot_mapping.tolist() == slots and got.logits_rows.tolist() == rows
        assert got.meta.block_tables.tolist() == tables
        assert (
            got.meta.block_tables.dtype == torch.int32
            and got.meta.slot_mapping.dtype == torch.int64
        )
        qsl = got.meta.query_start_loc.tolist()
        assert qsl[-1] == len(ids) and got.meta.seq_lens.tolist() == got.seq_lens
        checked["steps"] += 1
        return got

    monkeypatch.setattr(InputBatch, "build", checking)
    # a small pool (preemption), n > 1 (forks share a half-full block: copy-on-write), a small
    # token budget (chunked prefill mixed with decode), prefix caching on
    engine = make_engine(tiny, num_kv_blocks=40, max_num_batched_tokens=24, max_num_seqs=8)
    real_copy = engine.scheduler.bm.append_slot

    def counting(seq, n=1):
        copies = real_copy(seq, n)
        checked["cow"] += len(copies)
        return copies

    engine.scheduler.bm.append_slot = counting
    g = torch.Generator().manual_seed(3)
    for r in range(6):
        prompt = torch.randint(0, 256, (9 + 5 * r,), generator=g).tolist()
        params = SamplingParams(
            max_tokens=20 + 3 * r, temperature=0.8, seed=r, n=2 if r % 2 else 1, ignore_eos=True
        )
        engine.add_request(f"r{r}", prompt, params)
    while engine.has_unfinished_requests():
        engine.step()
    assert checked["steps"] > 20 and checked["cow"] > 0
    assert engine.scheduler.num_preemptions_total > 0


def test_running_outputs_are_snapshots_and_means_are_exact(tiny):
    engine = make_engine(tiny, num_kv_blocks=64)
    params = SamplingParams(max_tokens=12, temperature=1.0, seed=7, logprobs=2, ignore_eos=True)
    engine.add_request("a", [5, 17, 99, 3, 200], params)
    seen = []
    final = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            c = out.outputs[0]
            seen.append((c, list(c.token_ids), list(c.logprobs)))
            if out.finished:
                final = c
            else:
                seq = engine.requests["a"].seqs[0]
                n = len(seq.logprobs)
                assert c.mean_logprob == sum(seq.logprobs) / n  # the running sum, bit for bit
                assert c.mean_entropy == sum(seq.entropies) / n
    assert final is not None and type(final.token_ids) is list and type(final.logprobs) is list
    for k, (c, ids_then, lps_then) in enumerate(seen, start=1):
        assert len(c.token_ids) == k and c.token_ids == ids_then == final.token_ids[:k]
        assert c.logprobs == lps_then and len(c.logprobs) == k
    assert [lp.token_id for lp in final.logprobs] == final.token_ids


def test_zero_penalty_rows_ignore_their_history():
    """The runner passes [] as history for rows without penalties: the sampler must not care."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, generator=g)
    logits[0, 1] = logits[0].max() + 0.1  # wins unless its penalty (2 x 0.7 + 0.3) applies
    params = [
        SamplingParams(temperature=0.0, frequency_penalty=0.7, presence_penalty=0.3),
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.9, seed=1),
    ]
    hist = [[1, 1, 2], [int(logits[1].argmax())] * 4, [int(logits[2].argmax())] * 3]

    def run(history):
        gens = [None, None, torch.Generator().manual_seed(9)]
        return sample(logits, params, gens, history)

    full, trimmed = run(hist), run([hist[0], [], []])
    assert full.token_ids == trimmed.token_ids and full.logprobs == trimmed.logprobs
    assert run([[], [], []]).token_ids[0] == 1 and full.token_ids[0] != 1  # row 0's history counts
