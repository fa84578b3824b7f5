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
after a complete response). Every authenticated request then ends in
:func:`ending.end_exchange`, which writes its one usage row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.conf import settings

from responses_api.access.auth import authenticate, cached_caller, key_from_headers
from responses_api.backends.sse import EventWriter
from responses_api.gateway import routes
from responses_api.gateway.call import Call, Reply
from responses_api.gateway.draining import drain, shutting_down
from responses_api.gateway.encoding import decode
from responses_api.gateway.ending import end_exchange, end_served
from responses_api.gateway.exchange import Client, Exchange, new_request_id
from responses_api.gateway.failures import server_error, usage_backlog
from responses_api.gateway.responder import Responder
from responses_api.gateway.tracing import trace_begin, trace_end
from responses_api.protocol.errors import ApiError, body_too_large, body_too_slow, invalid
from responses_api.runtime import telemetry
from responses_api.runtime.metrics import unauthenticated_observe
from responses_api.usage.sink import sink

log = logging.getLogger("switchyard.requests")

Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]


class BodyAbandoned(Exception):
    """The client disconnected before its body was read."""


class ApiConsumer:
    """ASGI app for every path the route table serves (``routes.asgi_pattern``).

    No exception leaves it (``config.guard`` says why that matters): a
    request's own failures end it with its row (:func:`_salvage`). It is
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
            await self._serve(call, match, receive, headers)
        except Exception as exc:  # a bug: the request still ends, with its row
            await _salvage(call, exc)
        finally:
            await exchange.drop_hold()
            if telemetry.tracer is not None and (trace := telemetry.current.get()) is not None:
                trace_end(call, trace)

    async def _serve(
        self, call: Call, match: routes.Match, receive: Receive, headers: dict[bytes, bytes]
    ) -> None:
        exchange = call.exchange
        if drain.draining:
            # Not admitted (so no usage row): the client retries elsewhere.
            await _refuse(call, shutting_down())
            return
        if sink.full():
            await _refuse(call, usage_backlog())
            return
        key = key_from_headers(headers)
        try:
            exchange.authenticated(cached_caller(key) or await authenticate(key))
        except ApiError as error:
            # Unauthenticated: no usage row, and the body is never read.
            await _refuse(call, match.error or error)
            return
        if telemetry.tracer is not None:
            trace_begin(exchange, headers)
        if match.error is not None or match.handler is None:
            await end_exchange(call, error=match.error)
            return
        task = asyncio.current_task()
        assert task is not None
        drain.track(task, exchange)
        try:
            call.body = await read_body(receive, headers)
        except ApiError as error:
            await end_exchange(call, error=error)
            return
        except BodyAbandoned:
            exchange.client_gone()
            await end_exchange(call)
            return
        except asyncio.CancelledError:
            if not exchange.shutdown:
                raise
            exchange.cut_by_shutdown()
            await end_exchange(call, error=shutting_down())
            return
        listener = asyncio.ensure_future(_watch(receive, call.responder, task))
        try:
            await _run(call, match.handler, task, listener)
        finally:
            listener.cancel()
            if exchange.releases:
                await exchange.give_back_held()


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


async def _salvage(call: Call, exc: Exception) -> None:
    """End a request whose own ending failed (a bug): the row is handed
    over if it was not, and the response ends — an error if nothing was
    sent, else an ``error`` event closing the stream. Nothing raises out:
    an exception reaching the server after the response started would stop
    its housekeeping (daphne's 500 page cannot be sent any more)."""
    exchange, responder = call.exchange, call.responder
    log.error("request %s failed", exchange.request_id, exc_info=exc)
    error = server_error()
    try:
        if not exchange.submitted and exchange.caller is not None:
            if exchange.outcome.status != 499:
                exchange.fail(error, cause=f"{type(exc).__name__}: {exc}")
            await exchange.submit()
    except Exception:
        log.exception("request %s: its usage row could not be handed over", exchange.request_id)
    try:
        if not responder.started:
            await responder.error(error)
        elif not responder.finished:
            # Numbered after the stream's last event, by the stream's own writer.
            output = call.output
            writer = output.writer if output is not None and output.writer else EventWriter()
            await responder.end_stream(writer.encode([{**error.body()["error"], "type": "error"}]))
    except Exception:
        log.exception("request %s: its response could not be ended", exchange.request_id)
    finally:
        if exchange.releases:
            await exchange.give_back_held()


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


async def _run(
    call: Call,
    handler: Callable[[Call], Awaitable[Reply | None]],
    task: asyncio.Task[Any],
    listener: asyncio.Future[bool],
) -> None:
    """Run the handler and end the exchange, whatever the handler did."""
    try:
        await end_served(call, handler)
    except asyncio.CancelledError:
        if listener.done() and not listener.cancelled() and listener.result():
            task.uncancel()  # our own cancellation, for a client gone
            return
        raise


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


async def _watch(receive: Receive, responder: Responder, task: asyncio.Task[Any]) -> bool:
    """Cancel the exchange when the client disconnects before its response
    is complete; True when it did. The exchange runs in the consumer's own
    task, so a request costs one extra task (this one), not two."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if responder.finished:
                return False
            task.cancel()
            return True
