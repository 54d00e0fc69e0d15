"""The API driven by the official `openai` client against a real uvicorn server on loopback."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest
from test_server_support import API_KEY, ServerThread, make_settings, shared_engine

from serving.server.service.app import create_app

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server():
    settings = make_settings()
    app = create_app(settings, engine=shared_engine(), log_traffic=False)
    with ServerThread(app) as srv:
        srv.settings = settings
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)


@pytest.fixture(scope="module")
def model(server):
    return server.settings.model_name


@pytest.fixture(scope="module")
def tokenizer():
    return shared_engine().tokenizer


def test_greedy_chat_answers_and_counts_tokens(client, model, tokenizer):
    r = client.chat.completions.create(model=model, messages=PROMPT, max_tokens=10, temperature=0)
    choice = r.choices[0]
    assert "Paris" in choice.message.content and choice.message.role == "assistant"
    prompt = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True)
    assert r.usage.prompt_tokens == len(tokenizer.encode(prompt))
    assert 1 <= r.usage.completion_tokens <= 10
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion" and r.model == model
    assert choice.finish_reason in ("stop", "length")


def _stream_chat(client, **kw) -> tuple[dict[int, str], dict[int, str], object]:
    texts: dict[int, str] = {}
    reasons: dict[int, str] = {}
    usage = None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                assert c.index not in reasons, "a choice finished twice"
                reasons[c.index] = c.finish_reason
    return texts, reasons, usage


def test_streamed_text_equals_non_streamed_for_the_same_seed_with_n_2(client, model):
    kw = dict(
        model=model,
        messages=[{"role": "user", "content": "Tell me a story about a cat."}],
        max_tokens=12,
        temperature=0.9,
        seed=1234,
        n=2,
    )
    full = client.chat.completions.create(**kw)
    texts, reasons, usage = _stream_chat(client, stream_options={"include_usage": True}, **kw)
    assert [c.index for c in full.choices] == [0, 1]
    assert texts == {c.index: c.message.content for c in full.choices}
    assert reasons == {c.index: c.finish_reason for c in full.choices}
    assert usage.completion_tokens == full.usage.completion_tokens
    assert usage.prompt_tokens == full.usage.prompt_tokens
    assert full.choices[0].message.content != full.choices[1].message.content  # two samples


def test_chat_logprobs_are_consistent(client, model):
    r = client.chat.completions.create(
        model=model, messages=PROMPT, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3
    )
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        tops = [t.logprob for t in entry.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        # greedy: the sampled token is the most likely one
        assert entry.token == entry.top_logprobs[0].token
        assert entry.logprob == pytest.approx(tops[0], abs=1e-5)
        assert entry.logprob <= 0 and bytes(entry.bytes).decode("utf-8", "replace") == entry.token
    assert "".join(e.token for e in content).startswith(r.choices[0].message.content[:5])


def test_completions_prompt_forms_stop_and_logprobs(client, model, tokenizer):
    text = "The capital of France is"
    by_text = client.completions.create(
        model=model, prompt=text, max_tokens=5, temperature=0, logprobs=2
    )
    ids = tokenizer.encode(text)
    by_ids = client.completions.create(model=model, prompt=ids, max_tokens=5, temperature=0)
    assert by_text.choices[0].text == by_ids.choices[0].text
    assert by_text.usage.prompt_tokens == len(ids)
    lp = by_text.choices[0].logprobs
    assert (
        len(lp.tokens)
        == len(lp.token_logprobs)
        == len(lp.top_logprobs)
        == by_text.usage.completion_tokens
    )
    assert all(len(t) <= 2 for t in lp.top_logprobs) and lp.text_offset[0] == 0
    batch = client.completions.create(
        model=model, prompt=[text, "One, two, three,"], max_tokens=4, temperature=0, n=2
    )
    assert [c.index for c in batch.choices] == [0, 1, 2, 3]
    assert (
        batch.choices[0].text
        == batch.choices[1].text
        == by_text.choices[0].text[: len(batch.choices[0].text)]
    )
    stopped = client.completions.create(
        model=model, prompt=text, max_tokens=8, temperature=0, stop=["."]
    )
    assert stopped.choices[0].finish_reason == "stop" and "." not in stopped.choices[0].text
    one = client.completions.create(model=model, prompt=text, max_tokens=1, temperature=0)
    assert one.choices[0].finish_reason == "length" and one.usage.completion_tokens == 1


def test_streamed_completions_match_for_the_same_seed(client, model):
    kw = dict(model=model, prompt="Once upon a time", max_tokens=10, temperature=1.0, seed=7)
    full = client.completions.create(**kw)
    streamed = "".join(
        c.choices[0].text for c in client.completions.create(stream=True, **kw) if c.choices
    )
    assert streamed == full.choices[0].text


def test_async_client_runs_requests_concurrently(server, model):
    async def run() -> list[str]:
        async with openai.AsyncOpenAI(
            base_url=server.url + "/v1", api_key=API_KEY, max_retries=0
        ) as ac:
            calls = [
                ac.chat.completions.create(
                    model=model,
                    max_tokens=6,
                    temperature=0,
                    messages=[{"role": "user", "content": q}],
                )
                for q in ("What is 2+2?", "Name a color.", "What is the capital of France?")
            ]
            results = await asyncio.gather(*calls)
            stream = await ac.chat.completions.create(
                model=model, messages=PROMPT, max_tokens=6, temperature=0, stream=True
            )
            streamed = "".join(
                [c.choices[0].delta.content or "" async for c in stream if c.choices]
            )
        return [r.choices[0].message.content for r in results] + [streamed]

    answers = asyncio.run(run())
    assert all(answers) and answers[2] == answers[3]  # same greedy question, batched or streamed


def test_models_health_and_auth(server, model):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    assert [m.id for m in client.models.list().data] == [model]
    assert client.models.retrieve(model).id == model
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")
    assert httpx.get(server.url + "/health").status_code == 200
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        bad.chat.completions.create(model=model, messages=PROMPT, max_tokens=1)
    err = info.value.body
    assert info.value.status_code == 401 and err["code"] == "invalid_api_key"
    missing = httpx.post(server.url + "/v1/completions", json={"model": model, "prompt": "x"})
    assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
