"""A minimal Chat Completions backend for the benchmark: raw asyncio, no framework.

It understands the simulator's ``[[tokens:N]]`` and ``[[rate:N]]`` directives
(so the same prompts work against both) and nothing else. Responses are built
from precompiled byte templates so the backend costs a few tens of
microseconds per request and is never the bottleneck.

    python bench/fake_backend.py --port 8200
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time

import orjson

WORDS = [b"the", b"quick", b"brown", b"fox", b"jumps", b"over", b"a", b"lazy", b"dog"]
DIRECTIVE = re.compile(rb"\[\[(tokens|rate):([0-9.]+)\]\]")
MODELS = orjson.dumps({"object": "list", "data": [{"id": "sim-model", "object": "model"}]})


def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk carrying one SSE event."""
    payload = b"data: " + data + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Plan:
    __slots__ = ("model", "rate", "stream", "tokens", "usage")

    def __init__(self, body: bytes) -> None:
        request = orjson.loads(body)
        self.model = str(request.get("model") or "sim-model").encode()
        self.stream = bool(request.get("stream"))
        self.usage = bool((request.get("stream_options") or {}).get("include_usage"))
        tokens, rate = 16, 0.0
        messages = request.get("messages") or []
        if messages:
            content = messages[-1].get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            for name, value in DIRECTIVE.findall(str(content).encode()):
                if name == b"tokens":
                    tokens = int(float(value))
                else:
                    rate = float(value)
        limit = request.get("max_tokens") or request.get("max_completion_tokens")
        if limit:
            tokens = min(tokens, int(limit))
        self.tokens = tokens
        self.rate = rate


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task | None = None
        self.busy = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()

    def _next(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].decode("latin-1")
        lines = head.split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return
        body = self.buffer[end + 4 : end + 4 + length]
        self.buffer = self.buffer[end + 4 + length :]
        if path.endswith("/chat/completions") and method == "POST":
            plan = Plan(body)
            if plan.stream:
                self.busy = True
                self.task = asyncio.ensure_future(self._stream(plan))
                return
            self._json(plan)
        elif path.endswith("/models"):
            self._respond(200, MODELS)
        else:
            self._respond(404, b'{"error":{"message":"not found"}}')
        if self.buffer:
            self._next()

    def _respond(self, status: int, body: bytes) -> None:
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 %d OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status, len(body), body)
        )

    def _json(self, plan: Plan) -> None:
        text = b" ".join(WORDS[i % len(WORDS)] for i in range(plan.tokens)).decode()
        body = orjson.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": plan.model.decode(),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": 8,
                    "completion_tokens": plan.tokens,
                    "total_tokens": 8 + plan.tokens,
                },
            }
        )
        self._respond(200, body)

    async def _stream(self, plan: Plan) -> None:
        try:
            await self._write_stream(plan)
        finally:
            self.busy = False
        if self.buffer and self.transport is not None:
            self._next()

    async def _write_stream(self, plan: Plan) -> None:
        transport = self.transport
        assert transport is not None
        head = (
            b'{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":%d,"model":"%s",'
            % (
                int(time.time()),
                plan.model,
            )
        )
        transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            + _chunk(
                head + b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
                b'"finish_reason":null}]}'
            )
        )
        interval = 1.0 / plan.rate if plan.rate else 0.0
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(plan.tokens):
            if interval:
                # Paced on an absolute schedule so the backend itself does not drift.
                delay = start + (i + 1) * interval - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)  # one write per token, as a real server does
            if self.transport is None:
                return
            word = WORDS[i % len(WORDS)]
            transport.write(
                _chunk(
                    head + b'"choices":[{"index":0,"delta":{"content":" %s"},'
                    b'"finish_reason":null}]}' % word
                )
            )
        tail = _chunk(head + b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}')
        if plan.usage:
            tail += _chunk(
                head + b'"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":%d,'
                b'"total_tokens":%d}}' % (plan.tokens, plan.tokens + 8)
            )
        transport.write(tail + _chunk(b"[DONE]") + b"0\r\n\r\n")


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Connection, host, port, backlog=4096)
    print(f"fake backend on http://{host}:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8200)
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.host, args.port))
    else:
        uvloop.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
