"""Tokenizer and chat template against transformers' AutoTokenizer built from the same GGUF."""

from __future__ import annotations

import random

import pytest

from serving.tokenizer import Tokenizer

TEXTS = [
    "",
    "Hello, world!",
    "What is the capital of France?",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n\n\nand   runs     of      spaces",
    "Numbers: 3.14159, 1,000,000 and 2026-11-29T11:13:05Z; x=42  7",
    "unicode: café naïve Zürich — “quotes” … ½ ∑ ∫ √ ≠ ≤",
    "emoji: 😀🎉👍🏽👨‍👩‍👧‍👦 🇫🇷 ❤️",
    "CJK: 你好，世界。日本語のテキスト。한국어 텍스트",
    "RTL: مرحبا بالعالم שלום עולם",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
    "special-looking but not: <|im_start |> <im_end> <|endoftext|>text",
    "I'm sure they'll've done it; it's John's, we'd, you're",
    "\u200b zero width \u00a0 nbsp \ufeff bom",
    "a" * 300 + " " + "ab" * 100,
]


@pytest.fixture(scope="module")
def ours(smollm2_loaded) -> Tokenizer:
    return smollm2_loaded.tokenizer


@pytest.mark.parametrize("text", TEXTS)
def test_encode_matches_transformers(ours, hf_smollm2_tokenizer, text):
    for add_special in (False, True):
        assert ours.encode(text, add_special_tokens=add_special) == hf_smollm2_tokenizer.encode(
            text, add_special_tokens=add_special
        )


def test_decode_matches_transformers(ours, hf_smollm2_tokenizer):
    rng = random.Random(0)
    id_lists = [ours.encode(t) for t in TEXTS]
    # random ids: partial UTF-8 pieces, special tokens mid-text, anything
    id_lists += [
        [rng.randrange(ours.vocab_size) for _ in range(rng.randint(1, 40))] for _ in range(60)
    ]
    for ids in id_lists:
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == hf_smollm2_tokenizer.decode(
                ids, skip_special_tokens=skip
            ), ids
    for text in TEXTS:  # and encode/decode round-trips text without special tokens
        if "<|" not in text:
            assert ours.decode(ours.encode(text)) == text


def test_special_ids(ours, hf_smollm2_tokenizer):
    assert ours.bos_token_id == hf_smollm2_tokenizer.bos_token_id == 1
    assert ours.eos_token_id == hf_smollm2_tokenizer.eos_token_id == 2
    assert ours.eos_token_ids == {2}
    assert ours.vocab_size == len(hf_smollm2_tokenizer) == 49152
    # every control token of the file is special (skipped on decode), HF's named ones included
    assert set(hf_smollm2_tokenizer.all_special_ids) <= set(ours.all_special_ids)
    assert ours.all_special_ids == list(range(17))
    assert ours.convert_ids_to_tokens([1, 2, 33662]) == ["<|im_start|>", "<|im_end|>", "Ġhello"]
    assert ours.id_to_bytes(33662) == b" hello" and ours.id_to_bytes(2) == b"<|im_end|>"


CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}],
    [
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road? 🐔"},
        {"role": "user", "content": "Another, in 中文 please\n\nwith  spaces."},
    ],
]


@pytest.mark.parametrize("chat", CHATS)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_matches_transformers(
    ours, hf_smollm2_tokenizer, chat, add_generation_prompt
):
    expected = hf_smollm2_tokenizer.apply_chat_template(
        chat, tokenize=False, add_generation_prompt=add_generation_prompt
    )
    got = ours.apply_chat_template(chat, add_generation_prompt=add_generation_prompt)
    assert got == expected
    assert ours.encode(got) == hf_smollm2_tokenizer.encode(expected, add_special_tokens=False)


def test_content_parts_render_as_text(ours):
    parts = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]
    assert ours.apply_chat_template(parts) == ours.apply_chat_template(
        [{"role": "user", "content": "a\nb"}]
    )


@pytest.mark.parametrize(
    "messages,match",
    [
        ([], "non-empty list"),
        ("hello", "non-empty list"),
        (["hello"], r"messages\[0\] must be a dict"),
        ([{"role": "wizard", "content": "x"}], r"messages\[0\]\.role must be one of .*'wizard'"),
        ([{"content": "x"}], r"role must be one of .*None"),
        ([{"role": "user"}], r"messages\[0\] \(user\) has no content"),
        ([{"role": "user", "content": 5}], "must be a string or a list of text parts"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            "only text parts",
        ),
    ],
)
def test_bad_messages_raise_clear_errors(ours, messages, match):
    with pytest.raises(ValueError, match=match):
        ours.apply_chat_template(messages)


def test_template_raise_exception_becomes_value_error(tiny_vocab):
    from serving.tokenizer import render_chat_template

    template = (
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}"
        "{% endif %}ok"
    )
    assert render_chat_template(template, [{"role": "user", "content": "x"}]) == "ok"
    with pytest.raises(ValueError, match="first must be user"):
        render_chat_template(template, [{"role": "system", "content": "x"}])
    with pytest.raises(ValueError, match="syntax error"):
        render_chat_template("{% for %}", [{"role": "user", "content": "x"}])


def test_template_is_sandboxed():
    from serving.tokenizer import render_chat_template

    with pytest.raises(Exception, match="unsafe|access"):
        render_chat_template(
            "{{ ''.__class__.__mro__[1].__subclasses__() }}", [{"role": "user", "content": "x"}]
        )


def test_tools_reach_the_template():
    from serving.tokenizer import render_chat_template

    template = "{% for t in tools %}{{ t['function']['name'] }}={{ t | tojson }};{% endfor %}"
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "<é>"}}]
    out = render_chat_template(template, [{"role": "user", "content": "x"}], tools=tools)
    assert (
        out == 'get_weather={"type": "function", "function": '
        '{"name": "get_weather", "description": "<é>"}};'
    )
    with pytest.raises(ValueError, match="tools must be a list"):
        render_chat_template(template, [{"role": "user", "content": "x"}], tools={"a": 1})


def test_hf_dir_tokenizer_matches_transformers(tmp_path, write_tiny_tokenizer, tiny_vocab):
    from transformers import AutoTokenizer

    write_tiny_tokenizer(tmp_path)
    ours = Tokenizer.from_hf_dir(tmp_path)
    ref = AutoTokenizer.from_pretrained(str(tmp_path))
    for text in TEXTS:
        assert ours.encode(text) == ref.encode(text, add_special_tokens=False)
        assert ours.decode(ours.encode(text), skip_special_tokens=False) == ref.decode(
            ref.encode(text, add_special_tokens=False), skip_special_tokens=False
        )
    assert ours.eos_token_id == ref.eos_token_id == tiny_vocab["eos_id"]
    for chat in CHATS:
        assert ours.apply_chat_template(chat) == ref.apply_chat_template(
            chat, tokenize=False, add_generation_prompt=True
        )


def test_no_chat_template_is_a_clear_error(tmp_path, write_tiny_tokenizer):
    write_tiny_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ValueError, match="no chat template"):
        Tokenizer.from_hf_dir(tmp_path).apply_chat_template([{"role": "user", "content": "x"}])


# A Qwen2.5-style template: tools, tool calls, tool responses, namespace, loop.previtem, tojson
TOOL_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}
    {%- else %}{{- 'You are helpful.' }}{%- endif %}
    {{- "\\n\\n# Tools\\n<tools>" }}
    {%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(tool_turns=0) %}
{%- for message in messages %}
    {%- if message.role == "user" or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
        {%- for tool_call in message.tool_calls | default([]) %}
            {{- '\\n<tool_call>\\n{"name": "' + tool_call.function.name + '", "arguments": ' }}
            {{- tool_call.function.arguments | tojson }}{{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- set ns.tool_turns = ns.tool_turns + 1 %}
        {%- if loop.index0 == 0 or loop.previtem.role != "tool" %}{{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
        {%- if loop.last or loop.nextitem.role != "tool" %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
{{- '' if ns.tool_turns < 100 else raise_exception('too many') }}"""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather <now> & 'later'",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
TOOL_CHAT = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Zürich?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Zürich"}},
            }
        ],
    },
    {"role": "tool", "content": '{"temp": 3}'},
    {"role": "tool", "content": '{"wind": 12}'},
    {"role": "assistant", "content": "Cold: 3 °C."},
    {"role": "user", "content": "Thanks"},
]


@pytest.mark.parametrize("tools", [TOOLS, None])
def test_tool_template_matches_transformers(tmp_path, write_tiny_tokenizer, tools):
    import json

    from transformers import AutoTokenizer

    write_tiny_tokenizer(tmp_path)
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    cfg["chat_template"] = TOOL_TEMPLATE
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    ours = Tokenizer.from_hf_dir(tmp_path)
    ref = AutoTokenizer.from_pretrained(str(tmp_path))
    expected = ref.apply_chat_template(
        TOOL_CHAT, tools=tools, tokenize=False, add_generation_prompt=True
    )
    assert ours.apply_chat_template(TOOL_CHAT, tools=tools) == expected
    assert '<tool_response>\n{"temp": 3}\n</tool_response>\n<tool_response>' in expected
