"""A light OpenAI-style streaming upstream for bench_proxy's CPU runs: `POST /v1/completions`
streams `max_tokens` one-token events, one every `--itl-ms`, after `--ttft-ms`, then usage and
[DONE]; `GET /v1/models` names one model. Raw asyncio on uvloop, so the proxy is what costs.

    python -m bench.targets.fake_sse_upstream --port 9000 --ttft-ms 20 --itl-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import json

MODEL = "fake-upstream"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ttft: float, itl: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            if head.startswith(b"GET"):
                data = json.dumps(
                    {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(data), data)
                )
                continue
            n = int(body.get("max_tokens") or 16)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            await asyncio.sleep(ttft)
            for i in range(n):
                event = {
                    "id": "cmpl-fake",
                    "object": "text_completion",
                    "model": MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "text": f" t{i}",
                            "logprobs": None,
                            "finish_reason": "length" if i == n - 1 else None,
                        }
                    ],
                }
                writer.write(_chunk(b"data: " + json.dumps(event).encode() + b"\n\n"))
                await writer.drain()
                await asyncio.sleep(itl)
            usage = {
                "id": "cmpl-fake",
                "object": "text_completion",
                "model": MODEL,
                "choices": [],
                "usage": {"prompt_tokens": len(body.get("prompt") or []), "completion_tokens": n},
            }
            writer.write(
                _chunk(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
                + b"0\r\n\r\n"
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int, ttft: float, itl: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, ttft, itl), "127.0.0.1", port, backlog=1024
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=9000)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=5.0)
    a = p.parse_args()
    import uvloop

    uvloop.run(main(a.port, a.ttft_ms / 1000, a.itl_ms / 1000))
