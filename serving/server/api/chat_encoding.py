"""Chat prompts to token ids without role injection.

Encoding the rendered chat prompt as one string would turn `<|im_start|>system` typed inside a
user's message into the real control token: the user could open a system turn. So when a
message's text contains a special token's text, the prompt is rendered with per-request
placeholders in place of message texts, the template's own text is encoded with special tokens
and each message text is encoded as plain text (special-token strings become ordinary tokens).
Requests without such text take the single-string path and tokenize exactly as before.
"""

from __future__ import annotations

import re
import uuid
import weakref
from typing import Any

_plain_backends: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def special_texts(tokenizer: Any) -> list[str]:
    backend = getattr(tokenizer, "backend", None)
    if backend is None:
        return []
    return [
        t.content for t in backend.get_added_tokens_decoder().values() if t.special and t.content
    ]


def message_text(content: Any) -> str:
    """A message's text as the template sees it (text parts joined by newlines)."""
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def contains_special(content: Any, specials: list[str]) -> bool:
    text = message_text(content)
    return bool(text) and any(s in text for s in specials)


def _plain_backend(tokenizer: Any) -> Any:
    """A copy of the backend that reads special-token text as ordinary text (built once)."""
    backend = _plain_backends.get(tokenizer)
    if backend is None:
        from tokenizers import Tokenizer as Backend

        backend = Backend.from_str(tokenizer.backend.to_str())
        backend.encode_special_tokens = True
        _plain_backends[tokenizer] = backend
    return backend


def encode_chat(
    tokenizer: Any, messages: list[dict], tools: list[dict] | None
) -> tuple[str, list[int]]:
    """(prompt text, token ids) for `messages` (content: a string or a list of text parts)."""
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tools=tools)
    specials = special_texts(tokenizer)
    if not any(contains_special(m.get("content"), specials) for m in messages):
        return prompt, list(tokenizer.encode(prompt))
    nonce = uuid.uuid4().hex
    marked = [
        {**m, "content": f"\ue000{nonce}:{i}\ue001"}
        if contains_special(m.get("content"), specials)
        else m
        for i, m in enumerate(messages)
    ]
    skeleton = tokenizer.apply_chat_template(marked, add_generation_prompt=True, tools=tools)
    plain = _plain_backend(tokenizer)
    ids: list[int] = []
    pieces = re.split(f"\ue000{nonce}:(\\d+)\ue001", skeleton)
    for k, piece in enumerate(pieces):
        if k % 2 == 0:
            ids += tokenizer.encode(piece) if piece else []
        else:
            ids += plain.encode(
                message_text(messages[int(piece)]["content"]), add_special_tokens=False
            ).ids
    return prompt, ids
