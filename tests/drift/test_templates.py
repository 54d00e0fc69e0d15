"""Prompt templates (drift.features.templates, drift.features.prompt_parts): the wording around the
content.

Oracles: prompts built from known wordings around varied text must label by wording; any
string (empty, huge, unicode, one word, chat-templated) labels without raising, every prompt
gets exactly one label (UNSEEN counted, never dropped); the stored form round-trips to the same
labels.
"""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.features.prompt_parts import NO_SYSTEM, split_chat, system_prompt_id
from drift.features.templates import HEAD, TAIL, UNSEEN, TemplateModel, fit_templates, view

_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))
# content words: 3,000 distinct letter strings, Zipf-distributed like a text's words
WORDS = np.unique(
    ["".join(np.random.default_rng(i).choice(_LETTERS, 3 + i % 7)) for i in range(3000)]
)
_ZIPF = 1.0 / np.arange(1, WORDS.size + 1)
_ZIPF /= _ZIPF.sum()
WORDINGS = {
    "summ": "Summarize the following article:\n{c}\nSummary:",
    "qa": "Answer the question using the passage.\nPassage: {c}\nAnswer:",
    "sent": "What is the sentiment of the following review? {c}",
}
REWORDED = "Give a brief overview of the text below.\n{c}\nOverview:"


def content(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(8, 120)), p=_ZIPF))


def prompts(rng: np.random.Generator, n: int, wordings: list[str]) -> list[str]:
    return [wordings[i % len(wordings)].format(c=content(rng)) for i in range(n)]


def test_labels_follow_the_wording_not_the_content():
    rng = np.random.default_rng(0)
    base = prompts(rng, 600, list(WORDINGS.values()))
    model = fit_templates(base)
    labels = model.label(base)
    for k in range(3):  # each wording has one label, distinct from the others'
        assert len(set(labels[k::3])) == 1
    assert len(set(labels[:3])) == 3
    assert UNSEEN not in set(labels)
    fresh = model.label(prompts(rng, 90, list(WORDINGS.values())))
    assert list(fresh[:3]) == list(labels[:3])  # new content, same wordings: same labels
    assert "Summarize the following article:" in model.text(labels[0])
    assert "Summary:" in model.text(labels[0])


def test_a_reworded_template_does_not_take_an_old_label():
    rng = np.random.default_rng(1)
    model = fit_templates(prompts(rng, 600, list(WORDINGS.values())))
    summ = model.label(prompts(rng, 30, [WORDINGS["summ"]]))
    new = model.label(prompts(rng, 30, [REWORDED]))
    assert not set(new) & set(summ)


def test_stored_model_round_trips_through_json():
    rng = np.random.default_rng(2)
    base = prompts(rng, 300, list(WORDINGS.values()))
    model = fit_templates(base)
    again = TemplateModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model
    window = prompts(rng, 60, [*WORDINGS.values(), REWORDED])
    assert list(again.label(window)) == list(model.label(window))


ODD_TEXT = st.one_of(
    st.text(max_size=300),
    st.just(""),
    st.just("one"),
    st.text(alphabet="\u0000\u200b\u202e\U0001f600 \n\t", max_size=50),
    st.builds(lambda s, k: s * k, st.text(min_size=1, max_size=5), st.integers(1, 40_000)),
    st.builds(
        lambda s: f"<|im_start|>system\n{s}<|im_end|>\n<|im_start|>user\n{s}<|im_end|>", st.text()
    ),
    st.builds(lambda s: f"[INST] <<SYS>>{s}<</SYS>> {s} [/INST]", st.text(max_size=100)),
)


@settings(max_examples=60, deadline=None)
@given(base=st.lists(ODD_TEXT, max_size=12), window=st.lists(ODD_TEXT, max_size=12))
def test_any_prompt_gets_exactly_one_label(base, window):
    model = fit_templates(base, min_count=1)
    labels = model.label(window)
    assert len(labels) == len(window)
    assert all(lab == UNSEEN or lab in model.templates for lab in labels)
    for lab in labels:
        assert isinstance(model.text(lab), str)
    json.dumps(model.to_dict())


@settings(max_examples=100, deadline=None)
@given(ODD_TEXT)
def test_view_is_fixed_length_and_chat_parts_never_fail(text):
    assert len(view(text)) == HEAD + 1 + TAIL
    parts = split_chat(text)
    assert isinstance(parts.user, str)
    assert system_prompt_id(parts.system).startswith(("sys-", NO_SYSTEM))


def test_unseen_prompts_are_counted():
    rng = np.random.default_rng(3)
    model = fit_templates(prompts(rng, 300, [WORDINGS["summ"]]))
    window = prompts(rng, 40, [WORDINGS["summ"], REWORDED])
    labels = model.label(window)
    assert len(labels) == 40
    assert int(np.sum(labels == UNSEEN)) == 20


def test_chat_layouts_yield_the_system_message_and_last_user_turn():
    chatml = (
        "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nfirst<|im_end|>\n"
        "<|im_start|>assistant\nok<|im_end|>\n<|im_start|>user\nsecond<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert split_chat(chatml).system == "Be terse."
    assert split_chat(chatml).user == "second"
    llama3 = (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert (split_chat(llama3).system, split_chat(llama3).user) == ("Be terse.", "hello")
    llama2 = "<s>[INST] <<SYS>>\nBe terse.\n<</SYS>>\n\nhello [/INST]"
    assert (split_chat(llama2).system, split_chat(llama2).user) == ("Be terse.", "hello")
    assert split_chat("plain text").system is None
    assert system_prompt_id("Be  terse.") == system_prompt_id("Be terse.")
    assert system_prompt_id("Be terse.") != system_prompt_id("Be brief.")
