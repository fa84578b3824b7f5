"""A hostile Chat Completions backend for tests: an aiohttp server in a
thread of the test process, answering each request as its last user
message says (``hostile:<behaviour>``; anything else is a short, honest
stream). Every behaviour is something a real backend, broken or malicious,
has sent or could send."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from aiohttp import web

from tests.conftest import free_port


def _chunk(delta: dict[str, Any] | None = None, **extra: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-hostile",
        "object": "chat.completion.chunk",
        "model": "sim-model",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": None}],
    }
    body.update(extra)
    return b"data: " + orjson.dumps(body) + b"\n\n"


HELLO = _chunk({"role": "assistant", "content": "Hello"})
WORLD = _chunk({"content": " world"})
STOP = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"


def _usage(usage: Any) -> bytes:
    return b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n"


# What each behaviour streams after the headers (a 200 event stream).
STREAMS: dict[str, list[bytes]] = {
    "ok": [HELLO, WORLD, STOP, _usage({"prompt_tokens": 5, "completion_tokens": 2}), DONE],
    "content-int": [HELLO, _chunk({"content": 12345}), STOP, DONE],
    "first-content-int": [_chunk({"content": 12345}), STOP, DONE],
    "usage-negative": [HELLO, STOP, _usage({"prompt_tokens": -5, "completion_tokens": 2}), DONE],
    "usage-huge": [HELLO, STOP, _usage({"prompt_tokens": 2**40, "completion_tokens": 1}), DONE],
    "usage-list": [HELLO, STOP, b'data: {"choices": [], "usage": [1, 2]}\n\n', DONE],
    # Counts each within bounds, together impossible: billed as they stand,
    # 10⁸ cached input tokens would cost far more than the answer.
    "usage-impossible": [
        HELLO,
        WORLD,
        STOP,
        _usage(
            {
                "prompt_tokens": 10,
                "completion_tokens": 4,
                "total_tokens": 123456789,
                "prompt_tokens_details": {"cached_tokens": 100_000_000},
                "completion_tokens_details": {"reasoning_tokens": 50},
            }
        ),
        DONE,
    ],
    "choices-string": [b'data: {"choices": "abc"}\n\n', DONE],
    "arguments-object": [
        _chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]}),
        DONE,
    ],
    "tool-index-huge": [
        _chunk({"tool_calls": [{"index": 10**12, "id": "c1", "function": {"name": "f"}}]}),
        DONE,
    ],
    "not-json": [HELLO, b"data: {not json\n\n", DONE],
    "no-choices": [b'data: {"id": "x"}\n\n', DONE],
    "error-secret": [
        HELLO,
        b'data: {"error": {"message": "at /srv/secret-path token=s3cr3t", "type": "x"}}\n\n',
    ],
}


# A flood: 256 MiB of answer, in 64 KiB pieces of text, sent as fast as the
# connection takes it (most of it never is: the gateway hangs up first).
FLOOD_BYTES = 256 * 1024 * 1024
_PIECE = "x" * (64 * 1024)
FLOOD_CHUNK = _chunk({"content": _PIECE})
# A non-streamed answer's JSON body, around the same text.
FLOOD_JSON_HEAD = (
    b'{"id": "chatcmpl-hostile", "object": "chat.completion", "model": "sim-model", '
    b'"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", '
    b'"content": "'
)
FLOOD_JSON_TAIL = b'"}}], "usage": {"prompt_tokens": 5, "completion_tokens": 5}}'
# What each flood sends before its text: a count of one output token, or nothing.
FLOOD_BEFORE: dict[str, bytes] = {
    "flood": _chunk({"role": "assistant", "content": ""}),
    "flood-lying": _usage({"prompt_tokens": 5, "completion_tokens": 1}),
}


# The behaviours whose answer is no Chat Completions answer.
MALFORMED = [
    "content-int",
    "first-content-int",
    "usage-negative",
    "usage-huge",
    "usage-list",
    "choices-string",
    "arguments-object",
    "tool-index-huge",
    "no-choices",
]


class HostileBackend:
    """The server; ``url`` is its ``/v1`` base, ``requests`` what it was sent."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.requests: list[dict[str, Any]] = []
        self.tokenize_answer: Any = {"count": 7}
        self.tokenize_calls = 0
        # A behaviour for every chat request, whatever its messages say.
        self.behaviour: str | None = None
        # How many bytes of text each flood sent before the client hung up.
        self.flooded: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        # What still hangs (a handler asked to hang for good) ends here.
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/tokenize", self._tokenize)
        # Handlers that hang for good are cancelled at once when it stops,
        # not waited for (aiohttp's default grace is a minute).
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _tokenize(self, request: web.Request) -> web.Response:
        """vLLM's tokenizer endpoint, answering ``tokenize_answer``."""
        self.tokenize_calls += 1
        return web.json_response(self.tokenize_answer)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "sim-model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        behaviour = self.behaviour or _behaviour(body)
        if behaviour == "hang":
            await asyncio.sleep(3600)
        if behaviour == "hang-after-headers":
            response = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await response.prepare(request)
            await asyncio.sleep(3600)
        if behaviour == "flood-json":
            return await self._flood(request, "application/json", FLOOD_JSON_HEAD, _PIECE.encode())
        if behaviour in FLOOD_BEFORE:
            return await self._flood(
                request, "text/event-stream", FLOOD_BEFORE[behaviour], FLOOD_CHUNK
            )
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        if behaviour == "slow":  # long enough for a client to leave mid-way
            await response.write(HELLO)
            for _ in range(40):
                await asyncio.sleep(0.05)
                await response.write(WORLD)
        for piece in STREAMS.get(behaviour, STREAMS["ok"]):
            await response.write(piece)
        await response.write_eof()
        return response

    async def _flood(
        self, request: web.Request, content_type: str, head: bytes, piece: bytes
    ) -> web.StreamResponse:
        """``head``, then ``piece`` until ``FLOOD_BYTES`` went out or the
        client hung up; ``flooded`` records how many bytes of text went."""
        response = web.StreamResponse(headers={"content-type": content_type})
        await response.prepare(request)
        sent = 0
        try:
            await response.write(head)
            while sent < FLOOD_BYTES:
                await response.write(piece)
                sent += len(piece)
            tail = FLOOD_JSON_TAIL if content_type == "application/json" else STOP + DONE
            await response.write(tail)
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client hung up
        self.flooded.append(sent)
        return response

    def __enter__(self) -> HostileBackend:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _behaviour(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or ()):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        text = str(content or "")
        # The last user message naming one (a compaction's is its prompt).
        if "hostile:" in text:
            return text.split("hostile:", 1)[1].split()[0]
    return "ok"


@contextmanager
def hostile_backend() -> Iterator[HostileBackend]:
    with HostileBackend() as backend:
        yield backend
