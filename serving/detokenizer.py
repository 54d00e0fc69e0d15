"""Incremental, UTF-8-safe detokenization for streaming.

A byte-level BPE token can end in the middle of a multi-byte character (an emoji is often split
over 2-4 tokens). `add` returns only text that is complete: trailing bytes that could still
become a valid character are held back until the next token completes them. Bytes that can never
become valid are emitted as U+FFFD right away, exactly as a full `decode` would replace them, so
concatenating every delta (plus `flush()` at the end) equals `tokenizer.decode(all_ids)`.

Byte-level vocabularies use a per-token byte table and Python's incremental UTF-8 decoder (which
replaces invalid sequences the same way the tokenizers library's lossy decode does). Other
vocabularies fall back to decoding a short window of recent tokens (the vLLM approach).
"""

from __future__ import annotations

import codecs

from serving.tokenizer import Tokenizer

_REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.token_ids: list[int] = []
        self._text_parts: list[str] = []
        self._byte_level = tokenizer.is_byte_level
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # window fallback: ids[prefix:read] were already emitted, ids[read:] are pending
        self._prefix_offset = 0
        self._read_offset = 0

    @property
    def text(self) -> str:
        """All text emitted so far."""
        return "".join(self._text_parts)

    def add(self, token_id: int) -> str:
        """Feed one generated token; return the newly complete text (possibly "")."""
        self.token_ids.append(int(token_id))
        delta = self._add_bytes(int(token_id)) if self._byte_level else self._add_window()
        if delta:
            self._text_parts.append(delta)
        return delta

    def flush(self) -> str:
        """End of stream: release what is held back (an incomplete character becomes U+FFFD,
        as `decode` renders it)."""
        if self._byte_level:
            delta = self._utf8.decode(b"", final=True)
        else:
            full = self.tokenizer.decode(
                self.token_ids[self._prefix_offset :], self.skip_special_tokens
            )
            done = self.tokenizer.decode(
                self.token_ids[self._prefix_offset : self._read_offset], self.skip_special_tokens
            )
            delta = full[len(done) :] if full.startswith(done) else ""
            self._prefix_offset = self._read_offset = len(self.token_ids)
        if delta:
            self._text_parts.append(delta)
        return delta

    def _add_bytes(self, token_id: int) -> str:
        if self.skip_special_tokens and self.tokenizer.is_special(token_id):
            return ""
        return self._utf8.decode(self.tokenizer.id_to_bytes(token_id))

    def _add_window(self) -> str:
        ids, skip = self.token_ids, self.skip_special_tokens
        done = self.tokenizer.decode(ids[self._prefix_offset : self._read_offset], skip)
        full = self.tokenizer.decode(ids[self._prefix_offset :], skip)
        if len(full) > len(done) and not full.endswith(_REPLACEMENT):
            # the emitted window stays as left context, so leading-space rules decode as in full
            # text
            self._prefix_offset, self._read_offset = self._read_offset, len(ids)
            return full[len(done) :]
        return ""
