"""WebSocket mode: ``GET /v1/responses`` upgraded, many responses on one socket.

The client (Codex, the OpenAI SDK's ``responses.connect()``) sends
``{"type": "response.create", ...}`` text frames, each the body of a
``POST /v1/responses`` (``stream`` is implied); every event of the answer
comes back as one text frame holding the JSON object an SSE ``data:`` line
would hold. Each ``response.create`` is one request as HTTP knows it: the same
``relay.create_response`` (limits, routing, failover, translation), the same
ending, one usage row (method ``WS``), a 499 row when the client closes the
socket while it runs. Only the writer differs (``websocket_frames``).

The key is checked when the socket opens and again, from the cache, before
each ``response.create``, so a revoked key stops the next turn. A refusal is
one ``error`` frame (the OpenAI envelope with the HTTP status it would have
had) followed by the close. Responses run one after another, in the order
their frames arrived; a client with more than ``MAX_WAITING`` frames waiting
is closed (``too_many_frames``), as is one whose frame is over the size cap
(``request_too_large``, told by the protocol: ``config/websocket_sizes.py``),
and a socket past its key's or organisation's count of open sockets
(``websocket_caps``). Each such refusal leaves a usage row, and the response
it cuts ends with its error, not as a client gone. A socket lives at most
``SWITCHYARD_WEBSOCKET_MAX_SECONDS`` (60 minutes): then, once the response
under way has ended, it gets the ``websocket_connection_limit_reached``
error and is closed, and the client opens a new one. A draining process
closes its sockets the same way (``server_shutting_down``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Mapping
from typing import Any

import orjson
from django.conf import settings

from responses_api.access.auth import Caller, key_from_headers
from responses_api.edge.frames import (
    MAX_WAITING,
    TOO_LARGE,
    SocketResponder,
    SocketState,
    error_frame,
    frame_too_large,
    header_map,
    limit_reached,
    not_found,
    too_many_frames,
)
from responses_api.edge.http import Receive, Send
from responses_api.edge.routes import creates_responses
from responses_api.edge.socket_caps import Place, take
from responses_api.pipeline.call import RESPONSES, Call, Reply
from responses_api.pipeline.create import Mode, create_response
from responses_api.pipeline.draining import drain, shutting_down
from responses_api.pipeline.ending import end_exchange
from responses_api.pipeline.exchange import Client, Exchange, new_request_id
from responses_api.pipeline.failures import failure
from responses_api.pipeline.local_chain import LocalChain
from responses_api.pipeline.parse import MAX_DEPTH
from responses_api.pipeline.runner import caller_for, closed, run
from responses_api.pipeline.tracing import turn_begin
from responses_api.pipeline.writers import FrameWriter
from responses_api.protocol.errors import ApiError, body_too_large, invalid, too_deep
from responses_api.runtime.metrics import unauthenticated_observe

log = logging.getLogger("switchyard.requests")

ENDPOINT = RESPONSES
METHOD = "WS"  # the usage row's method of a response.create

# Close codes. Autobahn (daphne) lets an application send only 1000 and the
# private range 4000-4999: a socket refused closes with 4000 plus the HTTP
# status its error frame carries (4401 for a bad key), one the server ends
# (connection limit, draining, a bug) with 1000 after its error frame.
NORMAL = 1000


def refused(error: ApiError) -> int:
    return 4000 + error.status


# Frames a client may send that ask for no response.
IGNORED = frozenset({"response.processed"})


class ResponsesSocket:
    """The ASGI application of every WebSocket the server accepts."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        connection = Connection(scope, receive, send)
        try:
            await connection.run()
        except Exception:  # a bug: the socket closes, the process goes on
            log.exception("WebSocket connection failed")
            await connection.close(NORMAL)


class Frame:
    """One client frame: the body of a ``response.create``, or why it is none."""

    __slots__ = ("body", "error", "generate", "kind")

    def __init__(self, message: Mapping[str, Any]) -> None:
        self.kind = ""
        self.body = b""
        self.generate = True
        self.error: ApiError | None = None
        try:
            self._read(message)
        except ApiError as error:
            self.error = error

    def _read(self, message: Mapping[str, Any]) -> None:
        text = message.get("text")
        if text is None:
            raise invalid("Send JSON text frames; binary frames are not read.", code="invalid_json")
        cap = settings.SWITCHYARD_MAX_BODY_BYTES
        if len(text) * 4 > cap and len(text.encode()) > cap:
            raise body_too_large(cap)
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise invalid(f"The frame is not valid JSON: {exc}.", code="invalid_json") from None
        if not isinstance(data, dict):
            raise invalid("A frame must be a JSON object.", code="invalid_json")
        self.kind = kind = data.pop("type", None)
        if kind in IGNORED:
            return
        if kind != "response.create":
            raise invalid(
                f"Unknown event type {str(kind)[:100]!r}: send 'response.create'.",
                param="type",
                code="invalid_event_type",
            )
        generate = data.pop("generate", True)
        if not isinstance(generate, bool):
            raise invalid("generate must be true or false.", param="generate")
        if data.get("background"):
            raise invalid("background is not available over WebSocket.", param="background")
        data.pop("stream_id", None)
        data["stream"] = True  # implied: every answer is a stream of events
        self.generate = generate
        try:
            self.body = orjson.dumps(data)
        except orjson.JSONEncodeError:
            raise too_deep(MAX_DEPTH) from None


class _Stop:
    """What ends the queue of frames: the connection limit, or draining."""

    def __init__(self, error: ApiError) -> None:
        self.error = error


class Connection:
    """One socket: its key, its chain, and its frames, answered in order."""

    def __init__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.headers = header_map(scope)
        client = scope.get("client")
        self.client = Client.from_headers(self.headers, client[0] if client else None)
        self.key = key_from_headers(self.headers)
        self.state = SocketState()
        self.chain = LocalChain()
        self.frames: asyncio.Queue[Mapping[str, Any] | _Stop] = asyncio.Queue()
        self.turn: asyncio.Task[None] | None = None
        self.call: Call | None = None  # the turn's under way
        # The error a frame or the socket was refused with, after the key was accepted.
        self.refusal: ApiError | None = None

    async def run(self) -> None:
        if (await self.receive())["type"] != "websocket.connect":
            return
        await self.send({"type": "websocket.accept"})
        refusal = await self._refusal()
        if refusal is not None:
            await self.refuse(refusal, refused(refusal))
            return
        place = await self._place()
        if place is None:
            return
        try:
            await self._serve()
        finally:
            await place.give_back()

    async def _place(self) -> Place | None:
        """The socket's place under its key's and organisation's bounds;
        None once refused (with a usage row, as the key is known)."""
        try:
            return await take(await self._caller())
        except ApiError as error:
            await self.refuse_counted(error, refused(error))
        except Exception as exc:  # Redis out of reach: retry later (503)
            outage = failure("websocket", exc)
            await self.refuse_counted(outage, refused(outage))
        return None

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        limit = loop.call_later(
            settings.SWITCHYARD_WEBSOCKET_MAX_SECONDS,
            self.frames.put_nowait,
            _Stop(limit_reached()),
        )
        drain.sockets.add(self)
        worker = asyncio.ensure_future(self._work())
        try:
            # Until the client's close (or the server's, once acknowledged)
            # ends the socket: daphne then says it is disconnected.
            while (message := await self.receive())["type"] != "websocket.disconnect":
                if message["type"] != "websocket.receive" or worker.done() or self.refusal:
                    continue  # once refused, what is still coming is not read
                if TOO_LARGE in message:
                    error = frame_too_large(message[TOO_LARGE])
                    await self.refuse_counted(error, refused(error))
                    continue
                if self.frames.qsize() >= MAX_WAITING:
                    error = too_many_frames()
                    await self.refuse_counted(error, refused(error))
                    continue
                self.frames.put_nowait(message)
        finally:
            self.state.closed = True
            limit.cancel()
            drain.sockets.discard(self)
            if not worker.done():
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)

    def shut(self) -> None:
        """The process drains: close once the response under way has ended."""
        self.frames.put_nowait(_Stop(shutting_down()))

    async def _refusal(self) -> ApiError | None:
        path = self.scope.get("path", "")
        if not creates_responses(path):
            return not_found(path)
        if (refusal := closed()) is not None:
            return refusal
        try:
            await self._caller()
        except ApiError as error:
            return error
        return None

    async def _caller(self) -> Caller:
        return await caller_for(self.key)

    async def refuse(self, error: ApiError, code: int) -> None:
        """An error frame, then the close. Before a key was accepted, the
        refusal is counted and logged as an HTTP one is (no usage row)."""
        if error.status == 401:
            unauthenticated_observe(reason=error.code or error.type)
            log.info(
                "request refused",
                extra={
                    "switchyard": {
                        "method": "GET",
                        "endpoint": ENDPOINT,
                        "status": error.status,
                        "reason": error.code,
                        "client_ip": self.client.ip,
                    }
                },
            )
        await self._send_text(error_frame(error))
        await self.close(code)

    async def refuse_counted(self, error: ApiError, code: int) -> None:
        """A frame or socket refused once the key was accepted: its usage
        row, its error frame, then the close. The response under way, cut
        by the close, ends with the same error rather than as a client gone."""
        self.refusal = error  # no turn starts after the one under way
        turn, under_way = self.turn, self.call
        if turn is not None and under_way is not None and not under_way.exchange.submitted:
            under_way.cut_by = error
            turn.cancel()
        exchange = Exchange(
            request_id=new_request_id(), endpoint=ENDPOINT, method=METHOD, client=self.client
        )
        call = Call(exchange, SocketResponder(self.send, exchange, self.state), self.headers)
        with contextlib.suppress(ApiError):  # a key revoked since: no row
            exchange.authenticated(await self._caller())
        await end_exchange(call, error=error)
        await self.close(code)

    async def _send_text(self, text: str) -> None:
        if not self.state.closed:
            await self.send({"type": "websocket.send", "text": text})

    async def close(self, code: int) -> None:
        if self.state.closed:
            return
        self.state.closed = True
        try:
            await self.send({"type": "websocket.close", "code": code})
        except Exception:
            log.debug("the socket could not be closed", exc_info=True)

    async def _work(self) -> None:
        try:
            await self._answer_frames()
        except Exception:  # a bug: the socket closes rather than hang
            log.exception("WebSocket frames could not be answered")
            await self.close(NORMAL)

    async def _answer_frames(self) -> None:
        """Answer the frames one at a time; each response.create in a task
        of its own, which draining tracks and a disconnect cancels."""
        while True:
            message = await self.frames.get()
            if self.refusal is not None:
                return
            if isinstance(message, _Stop):
                await self.refuse(message.error, NORMAL)
                return
            frame = Frame(message)
            if frame.kind in IGNORED and frame.error is None:
                continue
            self.turn = asyncio.ensure_future(self._turn(frame))
            try:
                await self.turn
            except asyncio.CancelledError:
                if self.turn.cancelled() and not (self.state.closed or self.refusal):
                    continue  # ended by draining's deadline: its ending is written
                raise
            finally:
                self.turn = None
            if self.state.closed or self.refusal:
                return

    async def _turn(self, frame: Frame) -> None:
        exchange = Exchange(
            request_id=new_request_id(), endpoint=ENDPOINT, method=METHOD, client=self.client
        )
        call = Call(exchange, SocketResponder(self.send, exchange, self.state), self.headers)
        try:
            exchange.authenticated(await self._caller())
        except ApiError as error:  # the key was revoked since the socket opened
            await self.refuse(error, refused(error))
            return
        # Refused before its row is made, as an HTTP request is.
        if (refusal := closed()) is not None:
            await self.refuse(refusal, NORMAL if drain.draining else refused(refusal))
            return
        if self.refusal is not None:  # refused while this turn started: its row says so
            exchange.fail(self.refusal)
            await exchange.submit()
            return
        self.call = call
        try:
            answer = functools.partial(_answer, frame=frame, chain=self.chain)
            await run(call, answer, begin=self._begin)
        finally:
            writer = call.output.writer if call.output is not None else None
            last = writer.last if isinstance(writer, FrameWriter) else None
            self.chain.answered(last.get("response") if last is not None else None)
            self.call = None

    def _begin(self, exchange: Exchange) -> None:
        turn_begin(exchange, self.headers)


async def _answer(call: Call, *, frame: Frame, chain: LocalChain) -> Reply | None:
    if frame.error is not None:
        raise frame.error
    call.body = frame.body
    return await create_response(call, mode=Mode(chain=chain, generate=frame.generate))
