"""Integer sampler fields the engine core's codec cannot carry are refused as invalid (400),
not failed while sending to the core (500; found by the schemathesis fuzz test)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from serving.server.api.protocol import ChatCompletionRequest, CompletionRequest

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "model,extra",
    [(ChatCompletionRequest, {"messages": MESSAGES}), (CompletionRequest, {"prompt": "hi"})],
)
def test_top_k_beyond_32_bits_is_invalid_and_the_largest_allowed_is_kept(model, extra):
    with pytest.raises(ValidationError) as refused:
        model.model_validate(
            {"model": "m", "top_k": 16521023306691910971619606250404184064, **extra}
        )
    assert refused.value.errors()[0]["loc"] == ("top_k",)
    assert model.model_validate({"model": "m", "top_k": 2**31 - 1, **extra}).top_k == 2**31 - 1
