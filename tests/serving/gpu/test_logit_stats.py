"""The sampler's fused row statistics (serving/kernels/logit_stats.py) against torch's
log_softmax, entropy and argmax, and the sampler over them against its torch path."""

from __future__ import annotations

import pytest
import torch

from serving.engine.worker.token_sampler import _entropy, sample_on_device
from serving.kernels.logit_stats import CHUNK, logit_stats
from serving.sampling_params import SamplingParams


def reference(logits: torch.Tensor):
    lp = torch.log_softmax(logits.double(), dim=-1)
    ids = logits.argmax(dim=-1)
    return (
        torch.logsumexp(logits.double(), dim=-1),
        ids,
        lp.gather(1, ids[:, None]).squeeze(1),
        _entropy(lp),
    )


@pytest.mark.parametrize(
    "rows,vocab", [(1, 151936), (3, 49152), (7, 1000), (2, CHUNK + 1), (300, 4096), (1, 1)]
)
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_matches_log_softmax_entropy_and_argmax(rows, vocab, scale):
    g = torch.Generator(device="cuda").manual_seed(rows * 31 + vocab)
    logits = torch.randn(rows, vocab, device="cuda", generator=g) * scale
    lse, ids, packed = logit_stats(logits)
    ref_lse, ref_ids, ref_lp, ref_h = reference(logits)
    assert torch.equal(ids, ref_ids) and torch.equal(packed[0].long(), ref_ids)
    assert torch.allclose(lse.double(), ref_lse, rtol=1e-6, atol=1e-4)
    assert torch.allclose(packed[1], ref_lp, rtol=1e-5, atol=1e-4)
    assert torch.allclose(packed[2], ref_h, rtol=1e-4, atol=1e-4)


def test_ties_take_the_first_index_and_masked_logits_count_for_nothing():
    vocab = 5 * CHUNK + 17
    logits = torch.randn(4, vocab, device="cuda")
    logits[0, [3 * CHUNK + 5, CHUNK + 2, 4 * CHUNK]] = 50.0  # a tie across chunks
    logits[1, [7, 8]] = 50.0  # a tie inside one chunk
    logits[2, CHUNK:] = float("-inf")  # a masked vocabulary: whole chunks of -inf
    logits[3, ::2] = float("-inf")
    lse, ids, packed = logit_stats(logits)
    ref_lse, ref_ids, ref_lp, ref_h = reference(logits)
    assert ids.tolist() == ref_ids.tolist() and ids[0] == CHUNK + 2 and ids[1] == 7
    assert torch.isfinite(packed).all()
    assert torch.allclose(lse.double(), ref_lse, atol=1e-4)
    assert torch.allclose(packed[1], ref_lp, atol=1e-4) and torch.allclose(
        packed[2], ref_h, atol=1e-4
    )


def test_a_nan_poisons_only_its_own_row():
    logits = torch.randn(3, 3 * CHUNK, device="cuda")
    logits[1, CHUNK + 9] = float("nan")
    logits[1, 2 * CHUNK + 1] = float("nan")
    lse, ids, packed = logit_stats(logits)
    assert torch.isnan(lse[1]) and torch.isnan(packed[1, 1]) and torch.isnan(packed[2, 1])
    assert (
        ids[1] == CHUNK + 9 == logits.argmax(dim=-1)[1]
    )  # torch's argmax also takes the first NaN
    assert torch.isfinite(lse[[0, 2]]).all() and torch.isfinite(packed[:, [0, 2]]).all()


def test_sampler_on_the_gpu_matches_its_torch_path():
    """Greedy rows, penalties and top logprobs through the fused statistics (GPU) and through
    log_softmax (the same logits on the CPU): the same tokens, logprobs and alternatives."""
    g = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(4, 49152, device="cuda", generator=g) * 3
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.0, logprobs=5),
        SamplingParams(temperature=0.0, frequency_penalty=1.5, presence_penalty=0.5),
        SamplingParams(temperature=0.0, logprobs=2),
    ]
    history = [[], [], [int(logits[2].argmax())] * 3, []]  # row 2's favourite is penalised away
    for chosen_params in (
        params[:1],
        params,
    ):  # all plain greedy (packed by the kernel), then mixed
        n = len(chosen_params)
        gpu = sample_on_device(logits[:n], chosen_params, [None] * n, history[:n])
        cpu = sample_on_device(logits[:n].cpu(), chosen_params, [None] * n, history[:n])
        assert gpu.token_ids.tolist() == cpu.token_ids.tolist()
        assert torch.allclose(gpu.packed().cpu(), cpu.packed(), atol=1e-4)
        if cpu.top_values is not None:
            assert torch.equal(gpu.top_indices.cpu(), cpu.top_indices)
            assert torch.allclose(gpu.top_values.cpu(), cpu.top_values, atol=1e-4)
    assert cpu.token_ids[2] != logits[2].argmax().cpu()


def test_sampled_rows_report_the_logprob_of_their_draw():
    logits = torch.randn(2, 3000, device="cuda")
    gens = [torch.Generator(device="cuda").manual_seed(s) for s in (1, 2)]
    out = sample_on_device(
        logits,
        [SamplingParams(temperature=1.0, seed=1), SamplingParams(temperature=0.0)],
        gens,
        [[], []],
    )
    lp = torch.log_softmax(logits, dim=-1)
    assert torch.allclose(out.logprobs, lp.gather(1, out.token_ids[:, None]).squeeze(1), atol=1e-5)
    assert out.token_ids[1] == logits[1].argmax()
