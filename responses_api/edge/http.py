"""The API's ASGI application: one request in, one response out.

The order is what keeps a stranger cheap: the route is resolved and the
key authenticated from the headers *before any byte of the body is read*,
so a request without a valid key never makes the process buffer its body.
The body is then read under the size cap (a ``Content-Length`` over it is
refused unread, a chunked body as soon as it passes it) and a deadline.

While the handler runs, a listener task keeps reading the ASGI messages
(``AsyncHttpConsumer`` would not: channels #1249): ``http.disconnect``
cancels the handler if the response is still being written — aborting the
upstream request at once — and is otherwise ignored (daphne also sends it
after a complete response). Every authenticated request is run by the
runner (``pipeline/runner.py``), and so ends in :func:`ending.end_exchange`,
which writes its one usage row.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from django.conf import settings

from responses_api.access.auth import key_from_headers
from responses_api.edge import routes
from responses_api.edge.encoding import decode
from responses_api.pipeline.call import Call, Reply
from responses_api.pipeline.exchange import Client, Exchange, new_request_id
from responses_api.pipeline.failures import server_error
from responses_api.pipeline.responder import Responder
from responses_api.pipeline.runner import caller_for, closed, run, salvage
from responses_api.pipeline.tracing import trace_begin
from responses_api.protocol.errors import ApiError, body_too_large, body_too_slow, invalid
from responses_api.runtime import telemetry
from responses_api.runtime.metrics import unauthenticated_observe

log = logging.getLogger("switchyard.requests")

Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]


class BodyAbandoned(Exception):
    """The client disconnected before its body was read."""


class ApiConsumer:
    """ASGI app for every path the route table serves (``routes.asgi_pattern``).

    No exception leaves it (``config.guard`` says why that matters): a
    request's own failures end it with its row (``runner.salvage``). It is
    not wrapped in ``config.guard``, whose ``send`` wrapper would cost a
    coroutine per relayed chunk."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        headers = {name.lower(): value for name, value in scope.get("headers", ())}
        method = scope.get("method", "GET")
        try:
            match = routes.resolve(scope["path"], method)
            client = scope.get("client")
            exchange = Exchange(
                request_id=new_request_id(),
                endpoint=match.endpoint,
                method=method,
                client=Client.from_headers(headers, client[0] if client else None),
            )
        except Exception as exc:  # a bug before there is an exchange to end
            log.error("request to %s failed", str(scope.get("path"))[:200], exc_info=exc)
            await _unexchanged(send)
            return
        call = Call(
            exchange,
            Responder(send, exchange),
            headers,
            params=match.params,
            query_string=scope.get("query_string", b""),
        )
        try:
            await _serve(call, match, receive)
        except Exception as exc:  # a bug outside the runner: the request still ends
            await salvage(call, exc)


async def _serve(call: Call, match: routes.Match, receive: Receive) -> None:
    refusal = closed()
    if refusal is not None:
        await _refuse(call, refusal)
        return
    try:
        call.exchange.authenticated(await caller_for(key_from_headers(call.headers)))
    except ApiError as error:
        # Unauthenticated: no usage row, and the body is never read.
        await _refuse(call, match.error or error)
        return
    task = asyncio.current_task()
    assert task is not None
    served = _Served(match, receive, task)
    begin = functools.partial(trace_begin, headers=call.headers) if telemetry.tracer else None
    try:
        await run(call, served, begin=begin)
    except asyncio.CancelledError:
        if served.client_left():
            task.uncancel()  # our own cancellation, for a client gone
            return
        raise
    finally:
        if served.listener is not None:
            served.listener.cancel()


class _Served:
    """The HTTP part of the handler: the body, read under its cap and
    deadline once the key is accepted, and a watch for the client leaving
    while the response is written, which cancels the request (aborting its
    backend call at once). The exchange runs in the consumer's own task, so
    a request costs one extra task (the watch), not two."""

    __slots__ = ("listener", "match", "receive", "task")

    def __init__(self, match: routes.Match, receive: Receive, task: asyncio.Task[Any]) -> None:
        self.match = match
        self.receive = receive
        self.task = task
        self.listener: asyncio.Future[bool] | None = None

    async def __call__(self, call: Call) -> Reply | None:
        handler = self.match.handler
        if handler is None:  # no route: the match says why (404 or 405)
            assert self.match.error is not None
            raise self.match.error
        if self.match.streams_body:
            # An upload: the handler reads it as it arrives (no watch runs
            # meanwhile, as one reader of ``receive`` at a time).
            call.upload = body_chunks(self.receive)
            try:
                return await handler(call)
            except BodyAbandoned:
                call.exchange.client_gone()
                return None
        try:
            call.body = await read_body(self.receive, call.headers)
        except BodyAbandoned:
            call.exchange.client_gone()
            return None
        self.listener = asyncio.ensure_future(_watch(self.receive, call.responder, self.task))
        return await handler(call)

    def client_left(self) -> bool:
        listener = self.listener
        return (
            listener is not None
            and listener.done()
            and not listener.cancelled()
            and listener.result()
        )


async def _unexchanged(send: Send) -> None:
    error = server_error()
    body = error.to_bytes()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"x-request-id", new_request_id().encode()),
    ]
    try:
        await send({"type": "http.response.start", "status": 500, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    except Exception:
        log.debug("the error could not be sent", exc_info=True)


async def _refuse(call: Call, error: ApiError) -> None:
    """Answer a request refused before authentication. It belongs to no
    organisation, so it leaves no usage row: it is counted by reason and
    logged as one line (never with the key) that the console's trace page
    points support staff to."""
    exchange = call.exchange
    reason = error.code or error.type
    unauthenticated_observe(reason=reason)
    log.info(
        "request refused",
        extra={
            "switchyard": {
                "request_id": exchange.request_id,
                "method": exchange.method,
                "endpoint": exchange.endpoint[:200],
                "status": error.status,
                "reason": reason,
                "client_ip": exchange.client.ip,
            }
        },
    )
    await call.responder.error(error)


async def read_body(receive: Receive, headers: dict[bytes, bytes]) -> bytes:
    """The request's body, under the size cap and the read deadline, decoded
    (``Content-Encoding``) under the same cap."""
    cap = settings.SWITCHYARD_MAX_BODY_BYTES
    length = headers.get(b"content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise invalid("The Content-Length header is not a number.") from None
        if declared > cap:
            raise body_too_large(cap)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(settings.SWITCHYARD_BODY_TIMEOUT_SECONDS):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise BodyAbandoned
                if message["type"] != "http.request":
                    continue
                data = message.get("body", b"")
                size += len(data)
                if size > cap:
                    raise body_too_large(cap)
                chunks.append(data)
                if not message.get("more_body"):
                    break
    except TimeoutError:
        raise body_too_slow(settings.SWITCHYARD_BODY_TIMEOUT_SECONDS) from None
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return await decode(body, headers.get(b"content-encoding"), cap=cap)


async def body_chunks(receive: Receive) -> AsyncIterator[bytes]:
    """The body's chunks as they arrive, for a route that reads its own
    body, all within ``SWITCHYARD_FILES_UPLOAD_TIMEOUT_SECONDS``."""
    seconds = settings.SWITCHYARD_FILES_UPLOAD_TIMEOUT_SECONDS
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        left = deadline - asyncio.get_running_loop().time()
        try:
            message = await asyncio.wait_for(receive(), max(left, 0.001))
        except TimeoutError:
            raise body_too_slow(seconds) from None
        if message["type"] == "http.disconnect":
            raise BodyAbandoned
        if message["type"] != "http.request":
            continue
        data = message.get("body", b"")
        if data:
            yield data
        if not message.get("more_body"):
            return


async def _watch(receive: Receive, responder: Responder, task: asyncio.Task[Any]) -> bool:
    """Cancel the exchange when the client disconnects before its response
    is complete; True when it did."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if responder.finished:
                return False
            task.cancel()
            return True
