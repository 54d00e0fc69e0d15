"""Sharded loading and the partition arithmetic: each rank's tensors are exactly the slices of
the full ones (written out by hand here, not through the loader's own slice table), and the head
and vocabulary splits cover everything exactly once."""

from __future__ import annotations

import torch
from engine_fixtures import save_tiny_model
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.distributed.partition import balanced_range, head_shard, vocab_range
from serving.loader import load_model_files
from serving.loader.shard import ShardSpec


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, 500), st.integers(1, 16))
def test_balanced_range_covers_once(n, parts):
    ranges = [balanced_range(n, parts, i) for i in range(parts)]
    assert [i for a, b in ranges for i in range(a, b)] == list(range(n))
    sizes = [b - a for a, b in ranges]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(1, 8), st.integers(1, 6), st.integers(1, 8))
def test_head_shards_cover_every_query_head_once_with_its_kv_head(kv, group, ws):
    heads = kv * group
    try:
        shards = [head_shard(heads, kv, ws, r) for r in range(ws)]
    except ValueError:
        assert kv < ws and (ws % kv or group < ws // kv)
        return
    owned = [q for s in shards for q in range(s.q_start, s.q_start + s.q_count)]
    assert sorted(owned) == list(range(heads)) and len(owned) == heads
    for s in shards:  # query head q reads KV head q // group: that head must be on the rank
        assert {q // group for q in range(s.q_start, s.q_start + s.q_count)} <= set(
            range(s.kv_start, s.kv_start + s.kv_count)
        )


def _expected_slices(full: dict, cfg, rank: int, ws: int) -> dict:
    """The slices by hand: 4 heads / 2 KV heads of 16 dims, intermediate 128, vocab 256, 2 ranks."""
    assert ws == 2 and cfg.num_attention_heads == 4 and cfg.num_key_value_heads == 2
    hd, inter, vocab = cfg.head_dim, cfg.intermediate_size, cfg.vocab_size
    q = slice(rank * 2 * hd, (rank + 1) * 2 * hd)
    k = slice(rank * hd, (rank + 1) * hd)
    m = slice(rank * inter // 2, (rank + 1) * inter // 2)
    v = slice(rank * vocab // 2, (rank + 1) * vocab // 2)
    out = {}
    for name, t in full.items():
        if "q_proj" in name:
            out[name] = t[q]
        elif "k_proj" in name or "v_proj" in name:
            out[name] = t[k]
        elif "o_proj.weight" in name:
            out[name] = t[:, q]
        elif "gate_proj" in name or "up_proj" in name:
            out[name] = t[m]
        elif "down_proj" in name:
            out[name] = t[:, m]
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            out[name] = t[v]
        else:
            out[name] = t
    return out


def test_sharded_safetensors_load_holds_exact_slices(tmp_path):
    for arch in ("qwen2", "qwen3"):  # qkv bias; q/k norms (replicated)
        path = tmp_path / arch
        save_tiny_model(arch, path, seed=2)
        full = load_model_files(path)
        for rank in (0, 1):
            shard = load_model_files(path, shard=ShardSpec(rank, 2))
            expected = _expected_slices(full.state_dict, full.config, rank, 2)
            assert shard.state_dict.keys() == expected.keys()
            for name, t in expected.items():
                assert torch.equal(shard.state_dict[name], t), (arch, rank, name)


def save_single_kv_head_llama(path):
    """Four query heads sharing one KV head (so it is replicated on every rank), untied head."""
    import transformers as tf
    from engine_fixtures import byte_tokenizer_json

    config = tf.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        max_position_embeddings=512,
        initializer_range=0.2,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    torch.manual_seed(3)
    tf.LlamaForCausalLM(config).save_pretrained(str(path))
    byte_tokenizer_json(path)


def test_uneven_vocab_is_padded_with_zero_rows(tmp_path):
    save_single_kv_head_llama(tmp_path)
    full = load_model_files(tmp_path).state_dict["model.embed_tokens.weight"]  # 256 rows
    for rank in range(3):  # 86 rows per rank, the last holds 84 real ones
        start, end = vocab_range(256, 3, rank)
        got = load_model_files(tmp_path, shard=ShardSpec(rank, 3)).state_dict[
            "model.embed_tokens.weight"
        ]
        assert got.shape[0] == 86
        assert torch.equal(got[: end - start], full[start:end])
        assert not got[end - start :].any()
        assert (
            got.shape
            == load_model_files(tmp_path, shard=ShardSpec(rank, 3))
            .state_dict["lm_head.weight"]
            .shape
        )
