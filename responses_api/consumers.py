"""ASGI consumer for the API (everything under ``/v1/`` and ``/api/v1/``).

``AsyncHttpConsumer`` awaits its handler before it reads the next ASGI
message, so a disconnect during a long stream would go unseen (channels
#1249). Here a listener task keeps reading while the exchange runs:
``http.disconnect`` cancels the exchange if the response is still being
written — aborting the upstream request at once — and otherwise lets it
finish its cleanup (daphne also sends ``http.disconnect`` after a complete
response). The exchange's task is registered with ``draining.drain`` so that
a SIGTERM lets it finish, or ends it at the shutdown deadline.
"""

from __future__ import annotations

import asyncio
import re

from channels.generic.http import AsyncHttpConsumer

from responses_api import endpoints
from responses_api.draining import drain, shutting_down
from responses_api.relay import Exchange, Responder, new_request_id

_PREFIX = re.compile(r"^/(?:api/)?v1(/.*)?$")


def _no_delay(send) -> None:
    """Turn Nagle's algorithm off on the client's socket.

    Daphne (Twisted) leaves it on, so a small SSE write that follows another
    one waits for the client's delayed ACK — milliseconds to tens of
    milliseconds added to the first text delta and between events. ASGI
    gives no handle on the socket; daphne's ``send`` is a partial over its
    protocol object, so reach the transport through it when it is there.
    """
    args = getattr(send, "args", None)
    channel = getattr(args[0], "channel", None) if args else None
    set_no_delay = getattr(getattr(channel, "transport", None), "setTcpNoDelay", None)
    if set_no_delay is not None:
        set_no_delay(True)


class ApiConsumer(AsyncHttpConsumer):
    # The API needs no channel layer; skipping it saves a round trip per request.
    channel_layer_alias = "__none__"

    async def __call__(self, scope, receive, send) -> None:
        self.scope = scope
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
        body = b"".join(chunks)
        _no_delay(send)
        match = _PREFIX.match(scope["path"])
        route = (match.group(1) or "/") if match else scope["path"]
        exchange = Exchange(request_id=new_request_id(), endpoint=route)
        responder = Responder(send, exchange)
        if drain.draining:
            # Not admitted (so no usage row): the client retries elsewhere.
            await responder.error(shutting_down())
            return
        task = asyncio.current_task()
        assert task is not None
        drain.track(task, exchange)
        listener = asyncio.ensure_future(_watch(receive, responder, task))
        try:
            await endpoints.dispatch(scope, route, body, responder, exchange)
        except asyncio.CancelledError:
            # The exchange has ended as a 499 (and written its row); the
            # cancellation was ours unless the server cancelled us.
            if not (listener.done() and listener.result()):
                raise
        finally:
            listener.cancel()


async def _watch(receive, responder: Responder, task: asyncio.Task) -> bool:
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
