"""Tokenizer, chat template rendering (serving/tokenizer)."""

from serving.tokenizer.chat_template import normalize_messages, render_chat_template
from serving.tokenizer.tokenizer import Tokenizer

__all__ = ["Tokenizer", "normalize_messages", "render_chat_template"]
