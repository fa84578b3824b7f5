"""Writing one HTTP response to the ASGI server; nothing else touches ``send``."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from responses_api.pipeline.exchange import Exchange
from responses_api.pipeline.writers import EventWriter
from responses_api.protocol.errors import ApiError

log = logging.getLogger("switchyard.requests")

Send = Callable[[Mapping[str, Any]], Awaitable[None]]
JSON = b"application/json"


class Responder:
    """Writes the response; knows whether its headers, and its end, went out."""

    __slots__ = ("_send", "exchange", "finished", "started")

    def __init__(self, send: Send, exchange: Exchange) -> None:
        self._send = send
        self.exchange = exchange
        self.started = False
        self.finished = False

    def base_headers(self) -> list[tuple[bytes, bytes]]:
        exchange = self.exchange
        headers = [(b"x-request-id", exchange.request_id.encode())]
        if exchange.backend is not None:
            headers.append((b"x-backend-id", exchange.backend.id.encode()))
            headers.append((b"x-backend-name", exchange.backend.name.encode()))
        if exchange.placement.turn_state:
            headers.append((b"x-codex-turn-state", exchange.placement.turn_state.encode()))
        headers.extend(exchange.limit_headers)
        return headers

    async def json(
        self, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        # A length lets the server send the answer in one write: without one,
        # daphne (Twisted) frames it as chunked and writes the terminating
        # chunk separately, a second system call per request.
        headers = [
            (b"content-type", JSON),
            (b"content-length", b"%d" % len(body)),
            *self.base_headers(),
            *extra,
        ]
        self.started = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        self.finished = True
        await self._send({"type": "http.response.body", "body": body})

    def _raw_headers(
        self, length: int | None, media_type: bytes, *, attachment: bool = True
    ) -> list[tuple[bytes, bytes]]:
        headers = [(b"content-type", media_type)]
        if length is not None:
            headers.append((b"content-length", b"%d" % length))
        if attachment:
            headers.append((b"x-content-type-options", b"nosniff"))
            # A download, never a page of this origin (an uploaded .html file).
            headers.append((b"content-disposition", b"attachment"))
        return [*headers, *self.base_headers()]

    async def raw_stream(
        self,
        status: int,
        chunks: AsyncIterator[bytes],
        media_type: bytes,
        *,
        length: int | None,
        attachment: bool,
    ) -> None:
        """Bytes as ``chunks`` gives them (a file's content), never sniffed as
        another type: ``length`` bytes in all, or in chunked encoding when
        it is None.

        The status is out before the last chunk is known good: when
        ``chunks`` fails part way (content that stops opening), the body
        ends there, short of its ``Content-Length`` (or, chunked, where no
        complete document ends), so that no client takes it for the whole;
        the failure is logged."""
        headers = self._raw_headers(length, media_type, attachment=attachment)
        self.started = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        try:
            async for chunk in chunks:
                await self._send({"type": "http.response.body", "body": chunk, "more_body": True})
        except Exception:
            log.exception("request %s: its content stopped part way", self.exchange.request_id)
        finally:
            if isinstance(chunks, AsyncGenerator):
                await chunks.aclose()
        self.finished = True
        await self._send({"type": "http.response.body", "body": b""})

    async def error(self, error: ApiError) -> None:
        await self.json(error.status, error.to_bytes(), error.headers)

    def writer(self) -> EventWriter:
        """What encodes this response's events: Server-Sent Events here."""
        return EventWriter()

    async def start_stream(self) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            *self.base_headers(),
        ]
        self.started = True
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})

    async def chunk(self, data: bytes) -> None:
        """Write stream bytes. The relay writes once per backend read (every
        event that read produced), not once per event."""
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def end_stream(self, data: bytes) -> None:
        self.finished = True
        await self._send({"type": "http.response.body", "body": data, "more_body": False})
