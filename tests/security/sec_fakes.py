"""A model-free engine for the security tests: it tokenizes by characters, answers with a
fixed text, and feeds each request's outputs through an asyncio.Queue from a producer task,
the way AsyncLLMEngine's loop thread does, so a stalled reader shows up as a growing queue."""

from __future__ import annotations

import asyncio
import threading
import time

from engine_doubles import EngineClientDouble
from starlette.requests import Request

from serving.outputs import CompletionOutput, EngineStats, RequestMetrics, RequestOutput
from vigil.keys import Principal

API_KEY = "sec-test-key-0123456789"
TENANT_KEY = "sec-tenant-key-0123456789"
ADMIN_KEY = "sec-admin-key-0123456789"
OPERATOR_KEY = "sec-operator-key-0123456789"
MODEL = "fake-model"


class CharTokenizer:
    """Token id = code point; records the threads it ran on."""

    vocab_size = 0x110000

    def __init__(self) -> None:
        self.threads: list[str] = []

    def apply_chat_template(self, messages, add_generation_prompt=True, tools=None) -> str:
        self.threads.append(threading.current_thread().name)
        return (
            "".join(f"<|{m['role']}|>{m.get('content') or ''}\n" for m in messages)
            + "<|assistant|>"
        )

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        self.threads.append(threading.current_thread().name)
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_chatml_tokenizer():
    """A real `serving.tokenizer.Tokenizer`: byte-level, no merges, three ChatML specials."""
    from tokenizers import AddedToken, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as Backend

    from serving.tokenizer.gguf_vocab import bytes_to_unicode
    from serving.tokenizer.tokenizer import Tokenizer

    vocab = {t: i for i, t in enumerate(bytes_to_unicode().values())}
    backend = Backend(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    start, end = backend.token_to_id("<|im_start|>"), backend.token_to_id("<|im_end|>")
    return Tokenizer(backend, bos_token_id=start, eos_token_ids=[end], chat_template=CHATML)


class FakeEngine(EngineClientDouble):
    def __init__(
        self,
        steps: int = 3,
        piece: str = "ok ",
        max_model_len: int = 1 << 20,
        step_delay_s: float = 0.0,
        tokenizer=None,
    ) -> None:
        self.tokenizer = tokenizer or CharTokenizer()
        self.max_model_len = max_model_len
        self.steps, self.piece, self.step_delay_s = steps, piece, step_delay_s
        self.queues: dict[str, asyncio.Queue] = {}
        self.max_queued = 0
        self.aborted: list[str] = []

    def num_waiting(self) -> int:
        return 0

    def stats(self) -> EngineStats:
        return EngineStats()

    def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    async def _produce(
        self, request_id: str, ids: list[int], prompt: str | None, queue: asyncio.Queue
    ) -> None:
        text = ""
        metrics = RequestMetrics(arrival_time=time.monotonic())
        for step in range(self.steps):
            text += self.piece  # a new string each step, as the engine's seq.text += piece
            last = step == self.steps - 1
            choice = CompletionOutput(
                index=0,
                text=text,
                delta=self.piece,
                token_ids=[1] * (step + 1),
                finish_reason="length" if last else None,
            )
            queue.put_nowait(RequestOutput(request_id, prompt, ids, [choice], last, metrics))
            self.max_queued = max(self.max_queued, queue.qsize())
            await asyncio.sleep(self.step_delay_s)

    async def generate(self, request_id, prompt_token_ids, params, prompt=None):
        queue: asyncio.Queue = asyncio.Queue()
        self.queues[request_id] = queue
        producer = asyncio.create_task(
            self._produce(request_id, list(prompt_token_ids), prompt, queue)
        )
        try:
            while True:
                out = await queue.get()
                yield out
                if out.finished:
                    return
        finally:
            producer.cancel()


def chat_request(
    headers: dict[str, str], principal: Principal | None, peer: str = "203.0.113.7"
) -> Request:
    """A chat-completions request as the engine's auth sees it: its headers, the address it
    came from, and the principal its key resolved to (None: no key)."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": (peer, 1234),
        "state": {"principal": principal} if principal else {},
    }
    return Request(scope)
