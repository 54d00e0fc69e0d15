"""The checks a new request must pass before it is queued, as pure functions: the one source of
truth for the in-process engine (`LLMEngine.validate_request`) and for the API process, which
runs them against the engine core's limits before anything crosses the socket."""

from __future__ import annotations

from collections.abc import Container

from serving.sampling_params import SamplingParams


def check_request_id(request_id: str, in_use: Container[str]) -> None:
    if request_id in in_use:
        raise ValueError(f"request id {request_id!r} is already in use")


def check_new_request(
    request_id: str,
    prompt_token_ids: list[int],
    params: SamplingParams,
    *,
    in_use: Container[str],
    vocab_size: int,
    max_model_len: int,
) -> None:
    """Raise ValueError (SamplingParamsError for a parameter) naming the problem."""
    check_request_id(request_id, in_use)
    if not prompt_token_ids:
        raise ValueError("the prompt is empty: at least one token is needed")
    bad = [t for t in prompt_token_ids if not isinstance(t, int) or not 0 <= t < vocab_size]
    if bad:
        raise ValueError(f"prompt token id {bad[0]!r} is outside the vocabulary [0, {vocab_size})")
    if len(prompt_token_ids) >= max_model_len:
        raise ValueError(
            f"the prompt has {len(prompt_token_ids)} tokens but the context length is "
            f"{max_model_len}: at most {max_model_len - 1} prompt tokens fit"
        )
    params.validate()
