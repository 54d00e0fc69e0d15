"""LLMEngine API: request validation, abort, finish reasons, streaming deltas, metrics and stats,
and n > 1 (children share the prompt's blocks copy-on-write; each child's logprobs match HF on its
own full text, which would fail if a child read a sibling's KV)."""

from __future__ import annotations

import pytest
import torch
from engine_fixtures import greedy, make_engine, run_to_completion, save_tiny_model

from serving.loader import load_model_files
from serving.sampling_params import RequestOutputKind, SamplingParams, SamplingParamsError


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny_api")
    hf = save_tiny_model("llama", path, seed=5)
    return hf, load_model_files(path)


@pytest.fixture
def engine(tiny):
    return make_engine(tiny[1], num_kv_blocks=64)


PROMPT = [5, 17, 99, 3, 200, 41, 7, 77, 13, 8]  # 10 tokens: the last prompt block is half full


def test_rejects_bad_requests_with_named_problem(engine):
    with pytest.raises(ValueError, match="empty"):
        engine.add_request("a", [], greedy())
    with pytest.raises(ValueError, match="context length is 256"):
        engine.add_request("a", [1] * 256, greedy())
    with pytest.raises(ValueError, match="outside the vocabulary"):
        engine.add_request("a", [1, 256], greedy())
    with pytest.raises(SamplingParamsError) as err:
        engine.add_request("a", [1, 2], SamplingParams(temperature=3.0))
    assert err.value.param == "temperature"
    engine.add_request("a", [1, 2], greedy())
    with pytest.raises(ValueError, match="already in use"):
        engine.add_request("a", [1, 2], greedy())


def test_abort_frees_blocks_at_once(engine):
    engine.add_request("a", PROMPT, greedy(50))
    engine.add_request("b", PROMPT[:4], greedy(50))
    for _ in range(3):
        engine.step()
    assert engine.block_manager.num_free_blocks < 64
    final = engine.abort("a")
    assert final.finished and final.outputs[0].finish_reason == "abort"
    assert len(final.outputs[0].token_ids) == 3
    engine.abort("b")
    assert engine.block_manager.num_free_blocks == 64 and not engine.has_unfinished_requests()
    assert engine.abort("a") is None and engine.step() == []


def test_stop_token_id_and_max_tokens(engine):
    ref = run_to_completion(engine, {0: [("r", PROMPT, greedy(12))]})["r"].outputs[0]
    assert len(ref.token_ids) == 12 and ref.finish_reason == "length"
    stop_at = ref.token_ids[4]
    first = ref.token_ids.index(stop_at)
    out = run_to_completion(engine, {0: [("s", PROMPT, greedy(12, stop_token_ids=[stop_at]))]})["s"]
    c = out.outputs[0]
    assert c.token_ids == ref.token_ids[: first + 1]
    assert (c.finish_reason, c.stop_reason) == ("stop", stop_at)


def test_streamed_deltas_add_up_to_the_text_and_metrics_are_ordered(engine):
    engine.add_request("a", PROMPT, greedy(20))
    deltas, outputs = [], []
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs.append(out)
            deltas.append(out.outputs[0].delta)
    final = outputs[-1]
    assert final.finished and sum(o.finished for o in outputs) == 1
    assert (
        "".join(deltas)
        == final.outputs[0].text
        == engine.tokenizer.decode(final.outputs[0].token_ids)
    )
    m = final.metrics
    assert (
        m.arrival_time
        <= m.first_scheduled_time
        <= m.first_token_time
        <= m.last_token_time
        <= m.finished_time
    )
    stats = engine.stats()
    assert (stats.prompt_tokens_total, stats.generation_tokens_total) == (10, 20)


def test_final_only_requests_hand_out_their_finished_output_alone(engine):
    """A FINAL_ONLY request (an offline caller) gets one output, when it finishes, equal to the
    last cumulative output of the same request; a cumulative request beside it still streams."""
    final_only = greedy(20, output_kind=RequestOutputKind.FINAL_ONLY)
    engine.add_request("f", PROMPT, final_only)
    engine.add_request("f2", PROMPT[:4], greedy(12, n=2, output_kind=RequestOutputKind.FINAL_ONLY))
    engine.add_request("c", PROMPT, greedy(20))
    seen: dict[str, list] = {"f": [], "f2": [], "c": []}
    while engine.has_unfinished_requests():
        for out in engine.step():
            seen[out.request_id].append(out)
    assert len(seen["c"]) == 20 and len(seen["f"]) == 1 and len(seen["f2"]) == 1
    f, c = seen["f"][0], seen["c"][-1]
    assert f.finished and f.outputs[0].finish_reason == "length"
    assert f.outputs[0].token_ids == c.outputs[0].token_ids
    assert f.outputs[0].text == f.outputs[0].delta == c.outputs[0].text
    assert f.outputs[0].mean_logprob == pytest.approx(c.outputs[0].mean_logprob)
    assert [len(o.token_ids) for o in seen["f2"][0].outputs] == [12, 12]
    assert not engine.has_unfinished_requests()


def test_context_length_ends_a_request(tiny):
    engine = make_engine(tiny[1], num_kv_blocks=64, max_model_len=16)
    out = run_to_completion(engine, {0: [("a", PROMPT, greedy(100))]})["a"].outputs[0]
    assert len(out.token_ids) == 6 and out.finish_reason == "length"


def test_n_greedy_samples_equal_the_single_greedy_sample(engine):
    single = (
        run_to_completion(engine, {0: [("one", PROMPT, greedy(16))]})["one"].outputs[0].token_ids
    )
    out = run_to_completion(engine, {0: [("n", PROMPT, greedy(16, n=3))]})["n"]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    assert all(c.token_ids == single for c in out.outputs)


def test_n_children_share_prompt_blocks_copy_on_write(tiny):
    hf, loaded = tiny
    engine = make_engine(loaded, num_kv_blocks=64, enable_prefix_caching=False)
    params = SamplingParams(n=3, max_tokens=10, temperature=1.0, seed=99, logprobs=0)
    engine.add_request("n", PROMPT, params)
    out = engine.step()  # prefill + fork: three samples from one prompt computation
    assert [len(c.token_ids) for c in out[0].outputs] == [1, 1, 1]
    tables = [s.block_table for s in engine.requests["n"].seqs]
    assert tables[0] == tables[1] == tables[2]  # shared until someone writes
    *shared_full, shared_partial = tables[0]  # blocks of 4: [4 tokens, 4 tokens, 2 tokens]
    assert [engine.block_manager.blocks[b].ref_count for b in tables[0]] == [3, 3, 3]
    outputs = engine.step()  # each child writes into the half-full block: two copies, one owner
    tables = [s.block_table for s in engine.requests["n"].seqs]
    assert all(t[:2] == shared_full for t in tables)
    assert len({t[2] for t in tables}) == 3 and shared_partial in {t[2] for t in tables}
    while engine.has_unfinished_requests():
        outputs += engine.step()
    final = [o for o in outputs if o.finished][0]
    texts = [c.token_ids for c in final.outputs]
    assert len({tuple(t) for t in texts}) == 3  # three different seeded samples
    for c in final.outputs:  # each child's KV was its own: logprobs equal HF on its full text
        with torch.inference_mode():
            logits = hf(torch.tensor([PROMPT + c.token_ids])).logits[0].double()
        ref = torch.log_softmax(logits, -1)[len(PROMPT) - 1 : -1]
        ref_lp = ref.gather(1, torch.tensor(c.token_ids)[:, None])[:, 0]
        ours = torch.tensor([e.logprob for e in c.logprobs], dtype=torch.float64)
        torch.testing.assert_close(ours, ref_lp, atol=1e-4, rtol=0)
    assert engine.block_manager.num_free_blocks == 64


def test_n_samples_are_reproducible_whatever_the_batch(engine):
    params = SamplingParams(n=2, max_tokens=12, temperature=1.0, seed=2024)
    alone = run_to_completion(engine, {0: [("x", PROMPT, params)]})["x"]
    noise = [
        (f"o{i}", [i + 1] * (3 + 5 * i), SamplingParams(max_tokens=6, temperature=1.0))
        for i in range(4)
    ]
    mixed = run_to_completion(engine, {0: noise[:2], 1: [("x", PROMPT, params)], 4: noise[2:]})["x"]
    assert [c.token_ids for c in mixed.outputs] == [c.token_ids for c in alone.outputs]
    one = SamplingParams(n=1, max_tokens=12, temperature=1.0, seed=2024)
    first = run_to_completion(engine, {0: [("y", PROMPT, one)]})["y"].outputs[0]
    assert first.token_ids == alone.outputs[0].token_ids  # sample i uses the generator (seed, i)


def test_from_settings_sizes_the_pool_from_the_memory_budget(tiny, tmp_path_factory):
    from serving.engine import EngineConfig, build_engine
    from vigil.config import load_settings

    path = tmp_path_factory.mktemp("tiny_settings")
    save_tiny_model("llama", path, seed=5)
    settings = load_settings(
        model_path=str(path), kv_cache_memory_mb=1, device="cpu", torch_threads=1
    )
    engine = build_engine(EngineConfig.from_settings(settings))
    # 2 layers x (K, V) x 16 tokens x 2 kv heads x 16 dims x 4 bytes = 8 KiB per block
    assert engine.block_manager.num_blocks == 2**20 // 8192 == 128
    assert engine.max_model_len == 1024  # max_position_embeddings (the pool holds 2048 tokens)
    assert engine.model_config.arch == "llama" and engine.tokenizer is not None
    assert torch.get_num_threads() == 1
    out = run_to_completion(engine, {0: [("a", PROMPT, greedy(4))]})["a"].outputs[0]
    assert len(out.token_ids) == 4
