"""Request fields -> engine `SamplingParams`, with the context-length checks that make an
over-long prompt a 400 rather than an engine failure."""

from __future__ import annotations

from serving.sampling_params import SamplingParams, SamplingParamsError
from serving.server.api.protocol import SamplingFields
from serving.server.base.errors import APIError

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


def check_context(prompt_len: int, max_model_len: int, param: str) -> None:
    if prompt_len == 0:
        raise APIError(
            "the prompt is empty: at least one token is needed", param=param, code="empty_prompt"
        )
    if prompt_len >= max_model_len:
        raise APIError(
            f"This model's maximum context length is {max_model_len} tokens. However, your prompt "
            f"has {prompt_len} tokens, which leaves no room for a completion.",
            param=param,
            code="context_length_exceeded",
        )


def build_params(
    req: SamplingFields,
    *,
    prompt_len: int,
    max_model_len: int,
    max_tokens: int | None,
    default_max_tokens: int | None,
    logprobs: int | None,
    max_tokens_param: str = "max_tokens",
) -> SamplingParams:
    """`max_tokens` None -> `default_max_tokens`, or (None) the rest of the context."""
    if max_tokens is None:
        max_tokens = (
            default_max_tokens if default_max_tokens is not None else max_model_len - prompt_len
        )
        max_tokens = max(1, min(max_tokens, max_model_len - prompt_len))
    elif prompt_len + max_tokens > max_model_len:
        raise APIError(
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            "requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the prompt, {max_tokens} for the "
            f"completion). Please reduce the prompt or {max_tokens_param}.",
            param=max_tokens_param,
            code="context_length_exceeded",
        )
    params = SamplingParams(
        n=req.n,
        max_tokens=max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        top_k=-1 if req.top_k in (None, 0) else req.top_k,
        min_p=0.0 if req.min_p is None else req.min_p,
        frequency_penalty=req.frequency_penalty or 0.0,
        presence_penalty=req.presence_penalty or 0.0,
        seed=req.seed,
        stop=req.stop_list(),
        logprobs=logprobs,
        ignore_eos=req.ignore_eos,
    )
    try:
        params.validate()
    except SamplingParamsError as exc:
        raise APIError(str(exc), param=exc.param, code="invalid_value") from None
    return params


def add_token_ids(choices: list[dict], outputs: list) -> None:
    """`return_token_ids`: each choice gets its prompt's and its own generated token ids."""
    for choice, out in zip(choices, outputs, strict=True):
        generated = next(c for c in out.outputs if c.index == choice["index"] % len(out.outputs))
        choice["prompt_token_ids"] = list(out.prompt_token_ids)
        choice["token_ids"] = list(generated.token_ids)
