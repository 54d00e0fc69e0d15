"""The test-only attention fault switch the canary acceptance tests rely on: it finds each layer's
cache view, touches only the chosen layer, and is a no-op when off."""

from __future__ import annotations

import pytest
import torch

from serving.attention import fault


@pytest.fixture(autouse=True)
def off_afterwards():
    yield
    fault.set_scale_fault(None)


def test_layer_of_recovers_each_layers_k_and_v_views():
    # the runner's layout: [layers, 2, blocks, block_size, kv_heads, head_dim]
    cache = torch.zeros(5, 2, 3, 4, 2, 8)
    for layer in range(5):
        assert fault.layer_of(cache[layer, 0]) == layer
        assert fault.layer_of(cache[layer, 1]) == layer


def test_scale_changes_only_in_the_chosen_layer_and_only_while_on():
    cache = torch.zeros(4, 2, 2, 4, 1, 8)
    assert [fault.faulted_scale(0.5, cache[i, 0]) for i in range(4)] == [0.5] * 4
    fault.set_scale_fault(2, 1.1)
    assert [fault.faulted_scale(0.5, cache[i, 0]) for i in range(4)] == [
        0.5,
        0.5,
        pytest.approx(0.55),
        0.5,
    ]
    fault.set_scale_fault(None)
    assert fault.faulted_scale(0.5, cache[2, 0]) == 0.5


def test_environment_form():
    assert fault._parse("3:1.05") == (3, 1.05)
    assert fault._parse("") is None and fault._parse(None) is None
    with pytest.raises(ValueError):
        fault._parse("three")
