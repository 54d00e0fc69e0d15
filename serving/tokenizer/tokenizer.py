"""`Tokenizer`: encode/decode, special ids and the chat template, over a `tokenizers` backend.

Built from GGUF metadata (`from_gguf_metadata`, `from_gguf`) or a HF directory's tokenizer.json
(+ tokenizer_config.json / chat_template.jinja for the chat template; `from_hf_dir`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as Backend
from tokenizers import decoders

from serving.tokenizer.chat_template import render_chat_template
from serving.tokenizer.gguf_vocab import build_from_gguf, bytes_to_unicode

_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")
_BYTE_FALLBACK = re.compile(r"<0x[0-9A-Fa-f]{2}>")


class Tokenizer:
    def __init__(
        self,
        backend: Backend,
        *,
        bos_token_id: int | None,
        eos_token_ids: list[int],
        chat_template: str | None = None,
        special_tokens: dict[str, str] | None = None,
    ):
        self.backend = backend
        self.bos_token_id = bos_token_id
        self.eos_token_id: int | None = eos_token_ids[0] if eos_token_ids else None
        self.eos_token_ids: set[int] = set(eos_token_ids)
        self.chat_template = chat_template
        self.special_tokens = dict(special_tokens or {})  # "bos_token" -> "<|im_start|>", ...
        added = backend.get_added_tokens_decoder()
        self.all_special_ids: list[int] = sorted(i for i, t in added.items() if t.special)
        self._special_set = frozenset(self.all_special_ids)
        self.vocab_size: int = backend.get_vocab_size(with_added_tokens=True)
        self.is_byte_level = _has_byte_level_decoder(backend.decoder)
        self._byte_table: list[bytes] | None = None

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_gguf_metadata(cls, meta: dict[str, Any]) -> Tokenizer:
        tokens = meta["tokenizer.ggml.tokens"]
        ids = {
            k: meta.get(f"tokenizer.ggml.{k}_id")
            for k in ("bos_token", "eos_token", "unknown_token", "padding_token")
        }
        eos = [ids["eos_token"]] + [
            meta.get(f"tokenizer.ggml.{k}_token_id") for k in ("eot", "eom")
        ]
        names = dict(
            zip(
                _SPECIAL_NAMES,
                ("bos_token", "eos_token", "unknown_token", "padding_token"),
                strict=True,
            )
        )
        special = {n: tokens[ids[k]] for n, k in names.items() if ids[k] is not None}
        return cls(
            build_from_gguf(meta),
            bos_token_id=ids["bos_token"],
            eos_token_ids=list(dict.fromkeys(int(e) for e in eos if e is not None)),
            chat_template=meta.get("tokenizer.chat_template"),
            special_tokens=special,
        )

    @classmethod
    def from_gguf(cls, path: str | Path) -> Tokenizer:
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
        meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("tokenizer.")}
        return cls.from_gguf_metadata(meta)

    @classmethod
    def from_hf_dir(cls, path: str | Path, eos_token_ids: list[int] | None = None) -> Tokenizer:
        path = Path(path)
        backend = Backend.from_file(str(path / "tokenizer.json"))
        cfg_file = path / "tokenizer_config.json"
        cfg = json.loads(cfg_file.read_text()) if cfg_file.exists() else {}
        texts = {n: _token_text(cfg.get(n)) for n in _SPECIAL_NAMES}
        special = {n: t for n, t in texts.items() if t}
        ids = {n: backend.token_to_id(t) for n, t in special.items()}
        template = cfg.get("chat_template")
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        jinja_file = path / "chat_template.jinja"  # transformers 5 saves it beside the config
        if template is None and jinja_file.exists():
            template = jinja_file.read_text()
        eos_id = ids.get("eos_token")
        eos = list(eos_token_ids or []) or ([eos_id] if eos_id is not None else [])
        return cls(
            backend,
            bos_token_id=ids.get("bos_token"),
            eos_token_ids=eos,
            chat_template=template,
            special_tokens=special,
        )

    # ---- encode / decode ----------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str | None]:
        return [self.backend.id_to_token(int(i)) for i in ids]

    def token_to_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_set

    def id_to_bytes(self, token_id: int) -> bytes:
        """The raw bytes this token stands for: exact for byte-level vocabularies (what decoding
        it contributes before UTF-8 assembly; special tokens give their text). Other vocabularies:
        a byte-fallback token `<0xAB>` gives that byte, any other its decoded text (best effort:
        a decoder may strip a leading space from a lone token)."""
        if self._byte_table is None:
            self._byte_table = self._build_byte_table()
        return self._byte_table[token_id]

    def _build_byte_table(self) -> list[bytes]:
        table = []
        if self.is_byte_level:
            # Mirrors tokenizers' ByteLevel decoder: each char maps back to its byte; a token with
            # a char outside the byte alphabet (an added "<think>"-style token) is its own UTF-8.
            char_to_byte = {c: b for b, c in bytes_to_unicode().items()}
            for i in range(self.vocab_size):
                tok = self.backend.id_to_token(i) or ""
                if all(c in char_to_byte for c in tok):
                    table.append(bytes(char_to_byte[c] for c in tok))
                else:
                    table.append(tok.encode("utf-8"))
            return table
        for i in range(self.vocab_size):
            tok = self.backend.id_to_token(i) or ""
            if _BYTE_FALLBACK.fullmatch(tok):
                table.append(bytes([int(tok[3:5], 16)]))
            else:
                table.append(self.backend.decode([i], skip_special_tokens=False).encode("utf-8"))
        return table

    # ---- chat -------------------------------------------------------------------------
    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        **template_kwargs: Any,
    ) -> str:
        if not self.chat_template:
            raise ValueError("this model has no chat template; use a completion prompt instead")
        return render_chat_template(
            self.chat_template,
            messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            special_tokens=self.special_tokens,
            **template_kwargs,
        )


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):  # AddedToken serialized as {"content": ...}
        return value.get("content")
    return value if isinstance(value, str) else None


def _has_byte_level_decoder(decoder: Any) -> bool:
    if isinstance(decoder, decoders.ByteLevel):
        return True
    return isinstance(decoder, decoders.Sequence) and "ByteLevel" in repr(decoder)
