"""A logged prompt's parts: its system message and the text of its last user turn.

Records carry the chat-templated prompt as the model saw it (vigil/sample_record), so the
system message is inside the string between the template's markers. Recognised layouts:
ChatML (`<|im_start|>system ... <|im_end|>`), Llama 3 (`<|start_header_id|>system
<|end_header_id|> ... <|eot_id|>`), Gemma (`<start_of_turn>user ... <end_of_turn>`) and Llama 2 /
Mistral (`[INST] <<SYS>> ... <</SYS>> ... [/INST]`); a `developer` turn counts as a system one.
A prompt in none of them is all user text with no system message. Only the first MAX_SCAN
characters are read: the instruction a template adds sits in front of the content it wraps,
and the end of a longer prompt is read from its last MAX_SCAN characters.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MAX_SCAN = 32_768
SYSTEM_ROLES = frozenset({"system", "developer"})
_TURNS = (
    re.compile(r"<\|im_start\|>(\w+)[^\S\n]*\n?(.*?)(?=<\|im_end\|>|<\|im_start\|>|\Z)", re.S),
    re.compile(
        r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\s*(.*?)"
        r"(?=<\|eot_id\|>|<\|start_header_id\|>|\Z)",
        re.S,
    ),
    re.compile(r"<start_of_turn>(\w+)[^\S\n]*\n?(.*?)(?=<end_of_turn>|<start_of_turn>|\Z)", re.S),
)
_LLAMA2_SYS = re.compile(r"<<SYS>>\s*(.*?)\s*<</SYS>>", re.S)
_LLAMA2_INST = re.compile(r"\[INST\](.*?)(?=\[/INST\]|\Z)", re.S)
NO_SYSTEM = "(none)"


@dataclass(frozen=True)
class ChatParts:
    system: str | None  # the system (or developer) message; None when the prompt has none
    user: str  # the last user turn's text, or the whole prompt when it has no chat markers


def _scan(prompt: str) -> str:
    if len(prompt) <= 2 * MAX_SCAN:
        return prompt
    return prompt[:MAX_SCAN] + "\n" + prompt[-MAX_SCAN:]


def split_chat(prompt: str) -> ChatParts:
    """The system message and last user turn of a chat-templated prompt (see module doc)."""
    text = _scan(prompt if isinstance(prompt, str) else "")
    for pattern in _TURNS:
        turns = [(m.group(1).lower(), m.group(2).strip()) for m in pattern.finditer(text)]
        if not turns:
            continue
        system = next((body for role, body in turns if role in SYSTEM_ROLES), None)
        users = [body for role, body in turns if role == "user"]
        return ChatParts(system or None, users[-1] if users else "")
    if "[INST]" in text:
        sys_match = _LLAMA2_SYS.search(text)
        insts = _LLAMA2_INST.findall(text)
        user = _LLAMA2_SYS.sub("", insts[-1]).strip() if insts else ""
        return ChatParts(sys_match.group(1) if sys_match and sys_match.group(1) else None, user)
    return ChatParts(None, text)


def system_prompt_id(system: str | None) -> str:
    """A short stable id of a system message (its text never leaves the record): "sys-" and 10
    hex digits of its SHA-256 over the whitespace-normalised text; NO_SYSTEM without one."""
    if not system:
        return NO_SYSTEM
    normalised = " ".join(system.split()).encode("utf-8", "surrogatepass")
    return "sys-" + hashlib.sha256(normalised).hexdigest()[:10]
