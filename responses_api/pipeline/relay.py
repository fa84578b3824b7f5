"""Relaying a backend's chat stream: to the client as Responses events
(:func:`relay_stream`), or read whole for one JSON response (:func:`read_answer`).

A stream writes, per backend read, every event that read produced; its
terminal event is the ending's (``ending.end_exchange``). A failure after
the stream started is raised as the ``ApiError`` that the ending turns into
``response.failed``.

A JSON answer is still asked of the backend as a stream: the row's ``ttft``
and the ``Server-Timing`` header need the first token's time. Its body is
the ending's too, built from the translator.

Either is read up to its output cap (``translate.output_cap``), and no
further: the backend is hung up on (the answer, not complete, closes its
connection), and the response ends ``incomplete``, or failed when the
backend's own count of tokens could not hold what it sent (:func:`past_cap`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from django.conf import settings

from responses_api.backends.client import Answer, BackendError
from responses_api.backends.sse import (
    ChunkReader,
    UpstreamProtocolError,
    broken,
    malformed,
    stream_error,
)
from responses_api.pipeline.call import Call, Output
from responses_api.pipeline.failover import Attempt
from responses_api.pipeline.responder import Responder
from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.errors import ApiError
from responses_api.translate.chunks import BadChunk
from responses_api.translate.stream import StreamTranslator


async def relay_stream(
    call: Call, output: Output, upstream: AbstractAsyncContextManager[Attempt]
) -> None:
    """Open ``upstream`` and relay its answer. While the request waits for a
    backend slot or for the backend's first bytes, ``response.in_progress``
    is repeated every ``SWITCHYARD_KEEPALIVE_SECONDS`` (clients
    such as Codex reset idle timers only on events); the first tick starts
    the stream."""
    responder = call.responder
    translator = output.translator
    writer = output.writer
    assert writer is not None

    async def keepalive() -> None:
        if not responder.started:
            await start(responder, writer, translator)
        else:
            await responder.chunk(writer.encode([translator.keepalive()]))

    idle = Idle(settings.SWITCHYARD_KEEPALIVE_SECONDS, keepalive)
    try:
        async with upstream as attempt:
            output.plan = attempt.plan
            await idle.settle()  # a keep-alive under way writes before the stream goes on
            if not responder.started:
                await start(responder, writer, translator)
            await _pump(attempt, responder, writer, translator, idle)
    finally:
        await idle.stop()


async def start(responder: Responder, writer: EventWriter, translator: StreamTranslator) -> None:
    """The stream's headers and its ``response.created``/``in_progress``."""
    await responder.start_stream()
    await responder.chunk(writer.encode(translator.start()))


async def _pump(
    attempt: Attempt,
    responder: Responder,
    writer: EventWriter,
    translator: StreamTranslator,
    idle: Idle,
) -> None:
    answer = attempt.answer
    reader = ChunkReader()
    chunks = answer.chunks()
    try:
        while (data := await anext(chunks, None)) is not None:
            idle.touch()
            events: list[dict[str, Any]] = []
            for chunk in reader.feed(data):
                if "error" in chunk and not chunk.get("choices"):
                    if events:  # the tokens read with the error still reach the client
                        await responder.chunk(writer.encode(events))
                    raise stream_error(chunk["error"], attempt.route.backend.name)
                events.extend(translator.feed(chunk))
                if translator.first_token_at is not None and not writer.delta_sent:
                    # Send the first text delta at once: one read from a fast
                    # backend can hold the whole answer, and translating all
                    # of it first would hold the first token back.
                    writer.delta_sent = True
                    await responder.chunk(writer.encode(events))
                    events = []
            if events:  # one write for everything this read produced
                await responder.chunk(writer.encode(events))
            if reader.done:
                answer.complete = True
                return
            if translator.output_cap.reached:  # hung up on: see the module's docstring
                past_cap(translator, attempt.route.backend.name)
                return
    except (UpstreamProtocolError, BackendError) as exc:
        raise broken(exc) from None
    except BadChunk as exc:
        raise malformed(attempt.route.backend.name, exc) from None


class Idle:
    """Calls ``on_idle`` whenever ``interval`` seconds pass without a
    :meth:`touch`. One timer per stream, re-armed from the last touch, so a
    read costs an attribute write, not a timer."""

    __slots__ = ("_handle", "_loop", "interval", "last", "on_idle", "pending")

    def __init__(self, interval: float, on_idle: Callable[[], Awaitable[None]]) -> None:
        self._loop = asyncio.get_running_loop()
        self.interval = interval
        self.on_idle = on_idle
        self.pending: list[asyncio.Task[None]] = []
        self.last = self._loop.time()
        self._handle = self._loop.call_at(self.last + interval, self._check)

    def touch(self) -> None:
        self.last = self._loop.time()

    def _check(self) -> None:
        now = self._loop.time()
        if now - self.last >= self.interval:
            self.pending.append(self._loop.create_task(_run(self.on_idle)))
            self.last = now
        self._handle = self._loop.call_at(self.last + self.interval, self._check)

    async def settle(self) -> None:
        """Let the keep-alives under way finish writing."""
        if self.pending:
            pending, self.pending = self.pending, []
            await asyncio.gather(*pending, return_exceptions=True)

    async def stop(self) -> None:
        """No more keep-alives; those already under way finish writing first,
        so that the stream's last events follow them."""
        self._handle.cancel()
        await self.settle()


async def _run(on_idle: Callable[[], Awaitable[None]]) -> None:
    await on_idle()


async def read_answer(
    answer: Answer,
    translator: StreamTranslator,
    backend_name: str,
    deadline: asyncio.Timeout | None = None,
) -> None:
    """Translate a whole answer without writing (a non-streamed response:
    the backend is still asked to stream, for ``ttft``).
    ``deadline``, the first token's, is lifted once a token arrived."""
    reader = ChunkReader()
    chunks = answer.chunks()
    try:
        while (data := await anext(chunks, None)) is not None:
            for chunk in reader.feed(data):
                if "error" in chunk and not chunk.get("choices"):
                    raise stream_error(chunk["error"], backend_name)
                translator.feed(chunk)
            if deadline is not None and translator.first_token_at is not None:
                deadline.reschedule(None)
                deadline = None
            if reader.done:
                answer.complete = True
                return
            if translator.output_cap.reached:
                past_cap(translator, backend_name)
                return
    except (UpstreamProtocolError, BackendError) as exc:
        raise broken(exc) from None
    except BadChunk as exc:
        raise malformed(backend_name, exc) from None


def past_cap(translator: StreamTranslator, backend_name: str) -> None:
    """An answer that reached its output cap ends there, incomplete; unless
    its backend had said it wrote fewer tokens than that: its count was
    false (``OutputCap.miscounted``), a 502 ``backend_error`` naming it."""
    usage = translator.usage
    if translator.output_cap.miscounted(usage.output_tokens if usage.reported else None):
        raise ApiError(
            502,
            f"Backend '{backend_name}' sent more output than the {usage.output_tokens} "
            "tokens it counted can hold.",
            code="backend_error",
        )
