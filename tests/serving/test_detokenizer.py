"""IncrementalDetokenizer: concatenated deltas equal a full decode, text is never retracted, and
incomplete UTF-8 is held back instead of showing up as U+FFFD."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, pre_tokenizers, trainers

from serving.detokenizer import IncrementalDetokenizer
from serving.tokenizer import Tokenizer

TEXTS = [
    "Hello 😀 世界! café 👨‍👩‍👧‍👦 and 🇫🇷.",
    "日本語のテキストと한국어 텍스트, mixed with English and emoji 🎉🎉🎉",
    "code:\n    x = {'ключ': 'значение'}  # ≠ ≤ ∑\n",
]


@pytest.fixture(scope="module")
def tok(smollm2_loaded) -> Tokenizer:
    return smollm2_loaded.tokenizer


def stream(tok: Tokenizer, ids: list[int], skip: bool) -> tuple[list[str], str]:
    detok = IncrementalDetokenizer(tok, skip_special_tokens=skip)
    final = tok.decode(ids, skip_special_tokens=skip)
    deltas = []
    for i in ids:
        deltas.append(detok.add(i))
        assert final.startswith(detok.text)  # emitted text is never retracted or rewritten
    deltas.append(detok.flush())
    assert detok.text == "".join(deltas)
    return deltas, final


@pytest.mark.parametrize("text", TEXTS)
def test_real_text_streams_exactly(tok, text):
    ids = tok.encode(text)
    deltas, final = stream(tok, ids, skip=True)
    assert "".join(deltas) == final == text
    assert not any("\ufffd" in d for d in deltas)  # nothing half-done ever shown
    if any(ord(c) > 0xFFFF for c in text):  # emoji are split over tokens here
        assert "" in deltas[:-1]  # so some were held back until complete


def test_emoji_is_held_until_complete(tok):
    ids = tok.encode("😀")
    assert len(ids) >= 2
    detok = IncrementalDetokenizer(tok)
    assert [detok.add(i) for i in ids[:-1]] == [""] * (len(ids) - 1)
    assert detok.add(ids[-1]) == "😀"


def test_random_sequences_equal_full_decode(tok):
    rng = random.Random(7)

    def valid(i: int) -> bool:
        try:
            tok.id_to_bytes(i).decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False

    partial = [
        i for i in range(tok.vocab_size) if not valid(i)
    ]  # UTF-8 fragments (lead/continuation)
    assert len(partial) > 200
    special = tok.all_special_ids
    for trial in range(300):
        ids = []
        for _ in range(rng.randint(1, 30)):
            kind = rng.random()
            pool = partial if kind < 0.5 else special if kind < 0.6 else None
            ids.append(rng.choice(pool) if pool else rng.randrange(tok.vocab_size))
        for skip in (True, False):
            deltas, final = stream(tok, ids, skip)
            assert "".join(deltas) == final, (trial, ids, skip)


def test_special_tokens_skipped_or_kept(tok):
    ids = tok.encode("<|im_start|>assistant\nHi<|im_end|>")
    assert "".join(stream(tok, ids, skip=True)[0]) == "assistant\nHi"
    assert "".join(stream(tok, ids, skip=False)[0]) == "<|im_start|>assistant\nHi<|im_end|>"


def test_non_byte_level_vocabulary_uses_the_window():
    corpus = [
        "the quick brown fox jumps over the lazy dog",
        "café déjà vu naïve",
        "über straße",
    ] * 20
    backend = Backend(models.BPE(unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    backend.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]", "</s>"])
    )
    tok = Tokenizer(backend, bos_token_id=None, eos_token_ids=[1])
    assert not tok.is_byte_level
    fox = tok.encode("fox")
    assert b"".join(tok.id_to_bytes(i) for i in fox).strip() == b"fox"  # best effort, per token
    rng = random.Random(3)
    sequences = [tok.encode(t) for t in ["the lazy fox", "déjà vu über alles", " the  dog "]]
    sequences += [[rng.randrange(tok.vocab_size) for _ in range(15)] for _ in range(50)]
    for ids in sequences:
        for skip in (True, False):
            deltas, final = stream(tok, ids, skip)
            assert "".join(deltas) == final
