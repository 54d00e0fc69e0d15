"""Build a `tokenizers.Tokenizer` from a GGUF file's tokenizer metadata (llama.cpp key names).

Supported: `tokenizer.ggml.model == "gpt2"` (byte-level BPE: Llama-3, Qwen2/3, SmolLM2, ...).
Built the way HF transformers builds it from the same file (its GGUF integration is our oracle):
byte-level BPE over the file's tokens and merges, control tokens (type 3) added as special,
user-defined tokens (type 4) added whole, the pre-tokenizer split picked by `tokenizer.ggml.pre`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, processors
from tokenizers import Tokenizer as Backend

CONTROL, USER_DEFINED = 3, 4

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# `tokenizer.ggml.pre` -> split regex; anything else keeps GPT-2's own ByteLevel regex (SmolLM2's
# "smollm" included, as transformers does).
PRE_SPLITS = {
    **dict.fromkeys(
        ["llama3", "llama-v3", "llama-bpe", "falcon3", "smaug-bpe", "dbrx"], _LLAMA3_SPLIT
    ),
    **dict.fromkeys(["qwen2", "deepseek-r1-qwen", "megrez"], _QWEN2_SPLIT),
}


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used to spell byte-level tokens."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    keep += list(range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


def build_from_gguf(meta: dict[str, Any]) -> Backend:
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(
            f"unsupported GGUF tokenizer model {kind!r} (supported: 'gpt2' byte-level BPE)"
        )
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    token_types: list[int] = list(meta.get("tokenizer.ggml.token_type") or [])
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges") or []]
    spelling = bytes_to_unicode()
    alphabet = set(spelling.values())
    vocab = {
        tok if set(tok) <= alphabet else "".join(spelling[b] for b in tok.encode("utf-8")): i
        for i, tok in enumerate(tokens)
    }
    backend = Backend(
        models.BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
        )
    )
    split = PRE_SPLITS.get(meta.get("tokenizer.ggml.pre", ""))
    if split is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    backend.decoder = decoders.ByteLevel()
    # Control tokens stay whole and are "special" (skipped on decode); a control token spelled
    # outside the byte alphabet is a llama.cpp mislabel and is left alone (as transformers does).
    types = token_types or [0] * len(tokens)
    backend.add_special_tokens(
        [
            AddedToken(tok, normalized=False, special=True)
            for tok, kind_ in zip(tokens, types, strict=False)
            if kind_ == CONTROL and set(tok) <= alphabet
        ]
    )
    backend.add_tokens(
        [
            AddedToken(tok, normalized=False, special=False)
            for tok, kind_ in zip(tokens, types, strict=False)
            if kind_ == USER_DEFINED and tok in vocab
        ]
    )
    _set_post_processor(backend, meta, tokens)
    return backend


def _set_post_processor(backend: Backend, meta: dict[str, Any], tokens: list[str]) -> None:
    """`add_special_tokens=True` adds BOS/EOS only where the file says so (add_bos_token...)."""
    bos_id, eos_id = (
        meta.get("tokenizer.ggml.bos_token_id"),
        meta.get("tokenizer.ggml.eos_token_id"),
    )
    single, specials = "$A", []
    if bos_id is not None and meta.get("tokenizer.ggml.add_bos_token", False):
        single = f"{tokens[bos_id]} {single}"
        specials.append((tokens[bos_id], int(bos_id)))
    if eos_id is not None and meta.get("tokenizer.ggml.add_eos_token", False):
        single = f"{single} {tokens[eos_id]}"
        specials.append((tokens[eos_id], int(eos_id)))
    backend.post_processor = processors.TemplateProcessing(single=single, special_tokens=specials)
