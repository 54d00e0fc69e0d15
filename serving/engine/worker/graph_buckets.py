"""What the CUDA graphs of `GpuForward` are sized by and which one a step replays: the decode
batch buckets, the prefill token buckets and width, and the in-graph layout of a prefill graph's
decode rows (device ops only, so it is captured and replayed with the graph)."""

from __future__ import annotations

import torch

from serving.attention.base import AttentionMetadata

DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)
# tokens of a step with prompt rows; 384, 768, 1536: a step of many decode rows and one prompt
# pads less (its GEMMs run at the padded height)
PREFILL_BUCKETS = (16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048)
PREFILL_WIDTH = 64  # sequences of a prefill graph, until capture_up_to sizes it to the engine's
GRAPHED_DECODE_CONTEXT = 4096  # longest decode row a prefill graph takes (its split count is fixed)


def graph_decode_layout(
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    decode_seq_lens: torch.Tensor,
    decode_rows: torch.Tensor,
) -> None:
    """Fill a prefill graph's decode inputs from its step (device ops only: captured, replayed).
    A one-token query keeps its length and row; any other sequence, padding included, gets
    length 0 (its decode program reads nothing) and the first row of the step's first prompt,
    which the prefill kernel rewrites after the decode kernel's throwaway write."""
    q_lens = query_start_loc[1:] - query_start_loc[:-1]
    one = q_lens == 1
    first_prompt = torch.argmax((q_lens > 1).to(torch.int32)).view(1)
    decode_seq_lens.copy_(torch.where(one, seq_lens, 0))
    decode_rows.copy_(
        torch.where(one, query_start_loc[:-1], query_start_loc.index_select(0, first_prompt))
    )


def prefill_bucket(
    meta: AttentionMetadata, num_tokens: int, buckets: tuple[int, ...], width: int
) -> int | None:
    """The token bucket of the prefill graph a step replays: a step with a prompt row (not
    decode-only) of at most the largest bucket's tokens and `width` sequences, whose decode rows
    reach no further than GRAPHED_DECODE_CONTEXT; None for any other step."""
    if meta.is_decode_only or num_tokens < 2 or meta.num_seqs > width:
        return None
    if meta.num_seqs > 1:
        if meta.query_lens_cpu is None or meta.seq_lens_cpu is None:
            return None
        longest_decode = max(
            (s for q, s in zip(meta.query_lens_cpu, meta.seq_lens_cpu, strict=True) if q == 1),
            default=0,
        )
        if longest_decode > GRAPHED_DECODE_CONTEXT:
            return None
    return next((b for b in buckets if b >= num_tokens), None)
