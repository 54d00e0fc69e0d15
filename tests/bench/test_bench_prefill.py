"""bench_prefill on the CPU path (the tiny model): part (a)'s rows per budget and batch with
positive times and an MFU below 1, part (b)'s TPOT rows with the long prompt cut into the chunks
its budget allows; and the FLOP count's parameters against a real model's."""

from __future__ import annotations

import math

import pytest

from bench.common.results_table import write_results
from bench.suites.bench_prefill import (
    ALL_SHAPES,
    TINY_SHAPE,
    non_embedding_params,
    parse_args,
    prefill_flops,
    run,
)


def test_non_embedding_params_are_the_models_parameters_less_its_embeddings():
    from bench.common.hf_random import hf_random_model

    model = hf_random_model(TINY_SHAPE, device="cpu")
    counted = sum(
        p.numel()
        for name, p in model.named_parameters()
        if "embed_tokens" not in name and "lm_head" not in name
    )
    assert non_embedding_params(TINY_SHAPE) == counted
    # Qwen3-4B's model card: 3.6B parameters without the embeddings
    assert non_embedding_params(ALL_SHAPES["qwen3-4b"]) == pytest.approx(3.6e9, rel=0.02)


def test_prefill_flops_grow_quadratically_only_through_attention():
    cfg = ALL_SHAPES["qwen3-4b"]
    linear = 2 * non_embedding_params(cfg)
    attention_pair = 4 * cfg["num_hidden_layers"] * cfg["num_attention_heads"] * cfg["head_dim"]
    head = 2 * cfg["vocab_size"] * cfg["hidden_size"]
    assert prefill_flops(cfg, 1) == linear + attention_pair + head
    assert prefill_flops(cfg, 4096) == linear * 4096 + attention_pair * 4096 * 4097 / 2 + head


def _rows(table) -> dict[tuple[str, str], list[str]]:
    return {(row[0], row[1]): row for row in table.rows}


def test_the_cpu_path_fills_both_tables_with_sane_numbers(tmp_path):
    args = parse_args(
        [
            "--device", "cpu", "--shape", "tiny", "--prompt-len", "128", "--batches", "1,3",
            "--streams", "3", "--stream-prompt", "16", "--decode-steps", "8", "--reps", "2",
            "--max-num-batched-tokens", "40,256",
        ]
    )  # fmt: skip
    long, tpot = run(args)
    rows = _rows(long)
    assert set(rows) == {(b, n) for b in ("40", "256") for n in ("1", "3")}
    for (budget, prompts), row in rows.items():
        p50, last, steps, tok_s, tflops = (float(x) for x in row[3:8])
        mfu = float(row[8].rstrip(" %")) / 100
        assert 0 < p50 <= last and tok_s > 0 and tflops > 0 and 0 < mfu < 1
        # the table prints the prefill time to 0.1 ms: the rate agrees within that rounding
        rounding = 0.05 / last
        assert tok_s == pytest.approx(int(prompts) * 128 / (last / 1e3), rel=0.01 + rounding)
        # the scheduler's budget cuts the prompts: at least this many steps
        assert steps >= math.ceil(int(prompts) * 128 / int(budget))
    assert float(rows[("40", "1")][5]) >= 4 and float(rows[("256", "1")][5]) <= 2

    phases = _rows(tpot)
    during = "while a 128-token prompt is chunked in"
    assert set(phases) == {(b, p) for b in ("40", "256") for p in ("alone", during)}
    for (budget, phase), row in phases.items():
        p50, p99, worst = (float(x) for x in row[4:7])
        assert int(row[3]) > 0 and 0 < p50 <= p99 <= worst
        if phase == "alone":
            assert int(row[3]) == 8 * 3 and row[7] == "1.00x" and row[8] == "-"
        else:
            assert float(row[8]) > 0
            chunks = math.ceil(128 / (int(budget) - 3))  # the streams take 3 of each step's budget
            assert all(int(s) >= chunks for s in row[9].split("/"))
    assert min(int(s) for s in phases[("40", during)][9].split("/")) >= 4

    path = write_results("prefill", [long, tpot], directory=tmp_path)
    text = path.read_text()
    assert "max_num_batched_tokens" in text and during in text
