"""The sampler: one batch of last-position logits -> one token per row, plus logprob statistics.

Pipeline per row (the order HF transformers' logits processors use):
  penalties (frequency/presence, OpenAI semantics, over the row's generated tokens)
  -> greedy argmax when temperature < 1e-5
  -> else logits / temperature -> top-k -> top-p -> min-p -> softmax -> draw.

The draw is by inverse CDF with one uniform number per row. Each seeded row takes its number from
its own torch.Generator, so a request's samples depend only on its seed and its own logits,
never on which other requests share the batch. Rows without a generator use torch's global RNG.

Logprobs, the top-k alternatives and the entropy are computed from the RAW model distribution,
log_softmax of the unprocessed logits (no penalties, temperature or truncation), as OpenAI and
vLLM report them: they describe what the model believed, comparable across sampling settings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from serving.kernels import logit_stats
from serving.sampling_params import SamplingParams

GREEDY_EPS = 1e-5  # temperatures below this are treated as greedy (dividing by ~0 overflows)


@dataclass
class SamplerOutput:
    token_ids: list[int]
    logprobs: list[float]  # raw-distribution logprob of each sampled token
    entropies: list[float]  # entropy (nats) of each row's raw distribution
    # per row, (token_id, logprob) for the params.logprobs most likely tokens, best first
    # ([] for rows that did not ask); None when no row in the batch asked
    top_logprobs: list[list[tuple[int, float]]] | None


def apply_penalties(
    logits: torch.Tensor,
    output_token_ids: list[list[int]],
    frequency: torch.Tensor,
    presence: torch.Tensor,
) -> torch.Tensor:
    """OpenAI: logit[j] -= count[j] * frequency + (count[j] > 0) * presence, count over the
    row's generated tokens (not the prompt). Returns a new tensor."""
    counts = torch.zeros_like(logits)
    for row, ids in enumerate(output_token_ids):
        if ids:
            idx = torch.tensor(ids, dtype=torch.long, device=logits.device)
            counts[row].index_add_(0, idx, torch.ones(len(ids), device=logits.device))
    return logits - counts * frequency[:, None] - (counts > 0).float() * presence[:, None]


def apply_top_k(logits: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """Keep each row's k largest logits (ties with the k-th are kept); k <= 0 or >= V: off."""
    vocab = logits.shape[-1]
    active = (top_k > 0) & (top_k < vocab)
    if not bool(active.any()):
        return logits
    k = torch.where(active, top_k, torch.ones_like(top_k)).long()
    kth = logits.topk(int(k.max()), dim=-1).values.gather(1, (k - 1)[:, None])
    return logits.masked_fill((logits < kth) & active[:, None], float("-inf"))


def apply_top_p(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability mass reaches top_p
    (a token stays if the mass strictly before it, in descending order, is < top_p)."""
    active = top_p < 1.0
    if not bool(active.any()):
        return logits
    probs = logits.softmax(dim=-1)
    vocab = probs.shape[-1]
    # A full sort of a 50k vocabulary costs ~12 ms a row on CPU; the nucleus is a prefix of the
    # descending order, so the top-k candidates decide it exactly once their mass reaches top_p.
    k = min(vocab, 64)
    while True:
        top, idx = probs.topk(k, dim=-1)  # sorted, descending
        if k == vocab or bool(((top.sum(dim=-1) >= top_p) | ~active).all()):
            break
        k = min(vocab, k * 8)
    mass_before = top.cumsum(dim=-1) - top
    keep_sorted = mass_before < top_p[:, None]
    keep_sorted[:, 0] = True  # always keep the most likely token
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter_(1, idx, keep_sorted)
    return logits.masked_fill(~keep & active[:, None], float("-inf"))


def apply_min_p(logits: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """Drop tokens whose probability is below min_p times the row's top probability."""
    active = min_p > 0.0
    if not bool(active.any()):
        return logits
    probs = logits.softmax(dim=-1)
    threshold = probs.max(dim=-1, keepdim=True).values * min_p[:, None]
    return logits.masked_fill((probs < threshold) & active[:, None], float("-inf"))


def _entropy(logprobs: torch.Tensor) -> torch.Tensor:
    # 0 * log 0 is 0: clamping -inf (masked vocabulary) to the lowest float keeps 0 * x finite
    finite = logprobs.clamp(min=torch.finfo(logprobs.dtype).min)
    return -(logprobs.exp() * finite).sum(dim=-1)


def _draw(probs: torch.Tensor, generators: list[torch.Generator | None]) -> torch.Tensor:
    """One sample per row by inverse CDF: the first token whose cumulative probability exceeds
    u * total, u ~ U[0, 1). A row takes exactly one number from its own generator per step, so
    its draws depend on nothing but its seed and its own distribution. (One number instead of a
    vocabulary of noise: CPU exponential/uniform noise for 50k tokens costs ~2 ms a row.)"""
    u = torch.empty(probs.shape[0], 1, dtype=torch.float64, device=probs.device)
    unseeded = [i for i, g in enumerate(generators) if g is None]
    if unseeded:
        u[unseeded] = torch.rand(len(unseeded), 1, dtype=torch.float64, device=probs.device)
    for i, g in enumerate(generators):
        if g is not None:
            u[i] = torch.rand(1, generator=g, dtype=torch.float64, device=probs.device)
    cdf = probs.double().cumsum(dim=-1)  # float64: no visible rounding bias over 50k terms
    # right=True: a zero-probability token never wins (its cdf equals its predecessor's)
    token = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(1)
    return token.clamp_(max=probs.shape[-1] - 1)


@dataclass
class DeviceSample:
    """The sampler's results still on the logits' device, so a caller can copy them to the host
    asynchronously (the engine's async scheduling) or at once (`sample`)."""

    token_ids: torch.Tensor  # int64 [B]
    logprobs: torch.Tensor  # float32 [B]
    entropies: torch.Tensor  # float32 [B]
    top_values: torch.Tensor | None  # float32 [B, kmax] when a row asked for top logprobs
    top_indices: torch.Tensor | None  # int64 [B, kmax]
    wanted: list[int] | None  # per row, how many alternatives it asked for (None: no row asked)
    ready_packed: torch.Tensor | None = None  # `packed()` as a kernel wrote it already

    def packed(self) -> torch.Tensor:
        """token ids, logprobs and entropies as one float64 [3, B] tensor: one device->host copy
        (float64 holds token ids exactly and float32 values unchanged)."""
        if self.ready_packed is not None:
            return self.ready_packed
        return torch.stack(
            [self.token_ids.double(), self.logprobs.double(), self.entropies.double()]
        )


def host_lists(packed: torch.Tensor) -> tuple[list[int], list[float], list[float]]:
    ids_l, lps_l, ents_l = packed.tolist()
    return [int(t) for t in ids_l], lps_l, ents_l


def host_top_logprobs(
    wanted: list[int] | None, values: torch.Tensor | None, indices: torch.Tensor | None, batch: int
) -> list[list[tuple[int, float]]] | None:
    if wanted is None:
        return None
    top: list[list[tuple[int, float]]] = [[] for _ in range(batch)]
    if values is not None and indices is not None:
        values_l, indices_l = values.tolist(), indices.tolist()
        for i, k in enumerate(wanted):
            top[i] = list(zip(indices_l[i][:k], values_l[i][:k], strict=True))
    return top


def sample_on_device(
    logits: torch.Tensor,
    params: list[SamplingParams],
    generators: list[torch.Generator | None],
    output_token_ids: list[list[int]],
    stats: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> DeviceSample:
    """Sample one token per row of `logits` [B, V] (float32) without reading anything back to the
    host: every choice of what to run is made from `params` (host values), so on a GPU nothing
    here waits for the device unless a row uses top-k/top-p/min-p. `generators[i]` (on logits'
    device) seeds row i; `output_token_ids[i]` are row i's tokens generated so far (penalties)."""
    batch = logits.shape[0]
    if not (len(params) == len(generators) == len(output_token_ids) == batch):
        raise ValueError(
            f"sample: {batch} logit rows but {len(params)} params, {len(generators)} generators, "
            f"{len(output_token_ids)} output lists"
        )
    if stats is not None:
        return _sample_with_logit_stats(logits, params, generators, output_token_ids, stats)
    logits = logits.float()
    if logit_stats.applies(
        logits
    ):  # GPU: two kernels instead of a dozen (serving/kernels/logit_stats.py)
        return _sample_with_logit_stats(logits, params, generators, output_token_ids)
    raw_logprobs = torch.log_softmax(logits, dim=-1)
    entropies = _entropy(raw_logprobs)

    token_ids = _choose_tokens(logits, params, generators, output_token_ids, None)
    chosen = raw_logprobs.gather(1, token_ids[:, None]).squeeze(1)
    wanted, values, indices = _top_alternatives(raw_logprobs, params)
    return DeviceSample(token_ids, chosen, entropies, values, indices, wanted)


def _sample_with_logit_stats(
    logits, params, generators, output_token_ids, stats=None
) -> DeviceSample:
    """`sample_on_device` over the fused row statistics: the same values, computed from the
    log-normaliser instead of a materialised log_softmax (logprob = logit - lse)."""
    lse, greedy_ids, packed = stats if stats is not None else logit_stats.logit_stats(logits)
    entropies = packed[2]
    plain = _plain_greedy(params)
    if not plain or any(p.logprobs is not None for p in params):
        logits = logits.float()  # (a graph's are bf16: the processors and top-k read float32)
    if plain:  # every row greedy, no penalty: all in `packed`
        token_ids, chosen, ready = greedy_ids, packed[1], packed
    else:
        token_ids = _choose_tokens(logits, params, generators, output_token_ids, greedy_ids)
        chosen = logits.gather(1, token_ids[:, None]).squeeze(1) - lse
        ready = None
    wanted, values, indices = _top_alternatives(logits, params)
    if values is not None:
        values = values - lse[:, None]
    return DeviceSample(token_ids, chosen, entropies, values, indices, wanted, ready)


def _plain_greedy(params: list[SamplingParams]) -> bool:
    return not any(
        p.frequency_penalty or p.presence_penalty or p.temperature >= GREEDY_EPS for p in params
    )


def _column(values: list[float], dev: torch.device, dtype=np.float32) -> torch.Tensor:
    # via numpy: torch.tensor(list) costs ~0.2 us per element on the host
    return torch.from_numpy(np.asarray(values, dtype=dtype)).to(dev, non_blocking=True)


def _choose_tokens(logits, params, generators, output_token_ids, greedy_ids) -> torch.Tensor:
    """One token per row: the argmax of the (penalised) scores for greedy rows, a draw from the
    processed distribution for the others. `greedy_ids`: the raw logits' argmax, if known."""
    dev = logits.device
    scores = logits
    # decided on the host: no per-step tensors (or device sync) when no row has a penalty
    if any(p.frequency_penalty or p.presence_penalty for p in params):
        freq = _column([p.frequency_penalty for p in params], dev)
        pres = _column([p.presence_penalty for p in params], dev)
        scores = apply_penalties(logits, output_token_ids, freq, pres)
    token_ids = scores.argmax(dim=-1) if greedy_ids is None or scores is not logits else greedy_ids
    rows = [i for i, p in enumerate(params) if p.temperature >= GREEDY_EPS]
    if rows:
        sub = [params[i] for i in rows]
        vocab = logits.shape[-1]
        x = scores[rows] / _column([p.temperature for p in sub], dev)[:, None]
        # each filter is skipped on the host when no row uses it (its own check reads the device)
        if any(0 < p.top_k < vocab for p in sub):
            x = apply_top_k(x, _column([p.top_k for p in sub], dev, np.int64))
        if any(p.top_p < 1.0 for p in sub):
            x = apply_top_p(x, _column([p.top_p for p in sub], dev))
        if any(p.min_p > 0.0 for p in sub):
            x = apply_min_p(x, _column([p.min_p for p in sub], dev))
        token_ids[rows] = _draw(x.softmax(dim=-1), [generators[i] for i in rows])
    return token_ids


def _top_alternatives(scores: torch.Tensor, params: list[SamplingParams]):
    """(wanted, values, indices): each row's most likely tokens, as many as the row asked for
    (values in the units of `scores`); wanted None when no row asked."""
    if not any(p.logprobs is not None for p in params):
        return None, None, None
    wanted = [p.logprobs or 0 for p in params]
    kmax = max(wanted)
    if kmax == 0:
        return wanted, None, None
    values, indices = scores.topk(kmax, dim=-1)
    return wanted, values, indices


def sample(
    logits: torch.Tensor,
    params: list[SamplingParams],
    generators: list[torch.Generator | None],
    output_token_ids: list[list[int]],
) -> SamplerOutput:
    """`sample_on_device`, read back to host lists at once."""
    out = sample_on_device(logits, params, generators, output_token_ids)
    ids_l, lps_l, ents_l = host_lists(out.packed())
    top = host_top_logprobs(out.wanted, out.top_values, out.top_indices, logits.shape[0])
    return SamplerOutput(token_ids=ids_l, logprobs=lps_l, entropies=ents_l, top_logprobs=top)
