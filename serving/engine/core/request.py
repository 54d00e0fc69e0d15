"""Request and sequence state. A request owns `n` sequences (one until its prompt is computed,
then forked into n that share the prompt's KV blocks). The scheduler and block manager work on
sequences; outputs are grouped back per request.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field

import torch

from serving.outputs import RequestMetrics, TokenLogprob
from serving.sampling_params import SamplingParams


class SeqStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


def sample_seed(seed: int, index: int) -> int:
    """Seed for sample `index` of a request seeded with `seed`: stable across runs and batches."""
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass(eq=False)
class Sequence:
    seq_id: int
    request: Request
    index: int  # which of the request's n samples
    token_ids: list[int]  # prompt followed by generated tokens
    num_prompt_tokens: int
    status: SeqStatus = SeqStatus.WAITING
    num_computed_tokens: int = 0  # tokens whose KV is in the cache
    block_table: list[int] = field(default_factory=list)  # owned by the block manager
    num_hashed_blocks: int = 0  # leading full blocks already registered in the prefix cache
    block_hashes: list[int] = field(default_factory=list)  # hash chain of those blocks
    generator: torch.Generator | None = None
    # per generated token: sampled logprob and entropy; the API's logprob entries when asked
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    # running sums of the two lists, so per-step outputs report means in O(1) (left-to-right
    # addition, the order Python's sum() uses: the same floats as summing the lists)
    logprob_sum: float = 0.0
    entropy_sum: float = 0.0
    token_logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    text: str = ""  # detokenized text with stop strings removed
    sent_text_len: int = 0  # how much of `text` earlier outputs carried
    output_state: object = None  # the output processor's per-sequence state (detokenizer, stops)
    # leading entries of block_table the runner's persistent batch holds (worker/input_batch.py);
    # the block manager lowers it whenever it rewrites the table
    block_table_synced: int = 0
    # block tables of KV-cache groups past the first (kv_coordinator.py); None: one group
    group_tables: list | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_scored(self) -> int:
        return len(self.logprobs)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SeqStatus.FINISHED

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)


@dataclass(eq=False)
class Request:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams
    metrics: RequestMetrics
    seqs: list[Sequence] = field(default_factory=list)
    forked: bool = False  # True once the n samples exist (n == 1: from the start)
    emitted_final: bool = False
    # with params.prompt_logprobs: entry i scores prompt token i + 1 given tokens 0..i, as
    # (token id, logprob, [(alternative id, logprob), ...]); filled by the runner during prefill
    prompt_logprob_rows: list[tuple[int, float, list[tuple[int, float]]]] = field(
        default_factory=list
    )

    @property
    def is_finished(self) -> bool:
        if not self.forked:
            return False
        seqs = self.seqs
        if len(seqs) == 1:  # the common case, without a generator (called per request per step)
            return seqs[0].status is SeqStatus.FINISHED
        return all(s.status is SeqStatus.FINISHED for s in seqs)

    def make_generator(
        self, index: int, device: torch.device | str = "cpu"
    ) -> torch.Generator | None:
        """Sample `index`'s generator, on the device the sampler's logits live on."""
        if self.params.seed is None:
            return None
        gen = torch.Generator(device=device)
        gen.manual_seed(sample_seed(self.params.seed, index))
        return gen
