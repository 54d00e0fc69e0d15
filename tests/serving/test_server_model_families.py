"""Mistral, Gemma 3 and Gemma 4 tiny checkpoints served over the OpenAI API from their
directories: `/v1/models` announces the directory's name, and a greedy completion of a prompt
longer than the sliding window carries exactly transformers' `generate` tokens."""

from __future__ import annotations

import httpx
import pytest
import torch
from engine_fixtures import TINY_WINDOW, save_tiny_model
from test_server_support import API_KEY, ServerThread, make_settings, wait_for

from serving.server.service.app import create_app

HEADERS = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module", params=["mistral", "gemma3_text", "gemma4_text"])
def served(request, tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("models") / f"Tiny-{request.param}"
    path.mkdir()
    hf = save_tiny_model(request.param, path, seed=7)
    settings = make_settings(
        model_path=str(path),
        engine_process="inprocess",
        device="cpu",
        block_size=4,
        max_num_batched_tokens=16,
    )
    with ServerThread(create_app(settings, log_traffic=False)) as srv:
        ready = lambda: httpx.get(srv.url + "/health", timeout=5).status_code == 200  # noqa: E731
        assert wait_for(ready, timeout=120), "the engine did not load"
        yield srv, hf, path.name


def test_the_directory_name_is_the_served_model(served):
    srv, _, name = served
    r = httpx.get(srv.url + "/v1/models", headers=HEADERS, timeout=30)
    assert r.status_code == 200
    assert [m["id"] for m in r.json()["data"]] == [name]


def test_greedy_completion_equals_transformers(served):
    srv, hf, name = served
    gen = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, 256, (3 * TINY_WINDOW + 5,), generator=gen)
    body = {
        "model": name,
        "prompt": prompt.tolist(),
        "max_tokens": 16,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    r = httpx.post(srv.url + "/v1/completions", json=body, headers=HEADERS, timeout=120)
    assert r.status_code == 200, r.text
    ids = prompt[None, :]
    ref = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False)
    assert r.json()["choices"][0]["token_ids"] == ref[0, ids.shape[1] :].tolist()
