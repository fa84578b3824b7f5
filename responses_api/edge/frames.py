"""A response written as WebSocket text frames instead of Server-Sent Events.

The relay and the ending write every response through a
:class:`~responses_api.pipeline.responder.Responder` and encode its events with
the writer the responder gives them. Over a WebSocket the writer emits each
event as its JSON object (the very object an SSE ``data:`` line carries, with
the same ``sequence_number``), and the responder sends each as one text frame;
nothing else in the request path knows which transport it writes to.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from django.conf import settings

from responses_api.pipeline.responder import Responder, Send
from responses_api.pipeline.writers import SEPARATOR, EventWriter, FrameWriter
from responses_api.protocol.errors import ApiError

log = logging.getLogger("switchyard.requests")

# The key of the message by which the server's WebSocket protocol tells the
# application that a frame was over the size cap (config/websocket_sizes.py);
# its value is the cap, in bytes.
TOO_LARGE = "switchyard.too_large"


def error_frame(error: ApiError, request_id: str | None = None) -> str:
    """An error as the Responses WebSocket sends it: the OpenAI envelope's
    ``error`` with the HTTP status it would have had and its headers (Codex
    reads both, as it would from an HTTP answer)."""
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in error.headers}
    if request_id is not None:
        headers["x-request-id"] = request_id
    frame: dict[str, Any] = {"type": "error", "status": error.status, **error.body()}
    if headers:
        frame["headers"] = headers
    return orjson.dumps(frame).decode()


class SocketResponder(Responder):
    """Writes one ``response.create``'s answer on its socket. There are no
    headers to send: a stream "starts" silently, and an error before it does
    is one error frame. ``closed`` is shared with the connection: nothing is
    sent once the client has gone."""

    __slots__ = ("connection",)

    def __init__(self, send: Send, exchange: Any, connection: SocketState) -> None:
        super().__init__(send, exchange)
        self.connection = connection

    def writer(self) -> EventWriter:
        return FrameWriter()

    async def _frames(self, data: bytes) -> None:
        if self.connection.closed or not data:
            return
        send = self._send
        for frame in data.split(SEPARATOR):
            await send({"type": "websocket.send", "text": frame.decode()})

    async def json(
        self, status: int, body: bytes, extra: Iterable[tuple[bytes, bytes]] = ()
    ) -> None:
        # Not reached by response.create (always a stream); kept whole.
        self.started = self.finished = True
        await self._frames(body)

    async def error(self, error: ApiError) -> None:
        self.started = self.finished = True
        if not self.connection.closed:
            frame = error_frame(error, self.exchange.request_id)
            await self._send({"type": "websocket.send", "text": frame})

    async def start_stream(self) -> None:
        self.started = True

    async def chunk(self, data: bytes) -> None:
        await self._frames(data)

    async def end_stream(self, data: bytes) -> None:
        self.finished = True
        await self._frames(data)


class SocketState:
    """What a connection's turns share with it: whether it is closed."""

    __slots__ = ("closed",)

    def __init__(self) -> None:
        self.closed = False


def header_map(scope: Mapping[str, Any]) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", ())}


# Frames a socket may have waiting behind the response under way: a client
# that sends more is closed, rather than have the process hold them all.
MAX_WAITING = 16


def too_many_frames() -> ApiError:
    return ApiError(
        429,
        f"More than {MAX_WAITING} frames are waiting on this socket: send the next "
        "response.create once a response has ended.",
        code="too_many_frames",
    )


def frame_too_large(cap: int) -> ApiError:
    return ApiError(
        413,
        f"The frame is too large: at most {cap} bytes (SWITCHYARD_MAX_BODY_BYTES), "
        "decoded, are accepted.",
        code="request_too_large",
    )


def limit_reached() -> ApiError:
    minutes = settings.SWITCHYARD_WEBSOCKET_MAX_SECONDS / 60
    return ApiError(
        400,
        f"Responses websocket connection limit reached ({minutes:g} minutes). "
        "Create a new websocket connection to continue.",
        code="websocket_connection_limit_reached",
    )


def not_found(path: str) -> ApiError:
    return ApiError(
        404,
        f"Unknown WebSocket URL: {path[:200]}. WebSocket mode is served at /v1/responses.",
        code="unknown_url",
    )
