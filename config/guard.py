"""The last line of defence between the application and the server.

Daphne answers an application's exception with a 500 page. Once the
response has started it cannot, and the error it raises instead stops
daphne's ``application_checker``, which never runs again: from then on no
finished request is reaped and no timed-out connection closed, and a
process that serves thousands of connections grows until it is restarted.
So no exception may reach the server. The API's consumer ends its own
failures (``responses_api.edge.http``); this wrapper, around Django's
application (``config.asgi``), catches what a bug lets through there: an
error envelope if nothing was sent yet, else the end of the body, and one
log line.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

log = logging.getLogger("switchyard.requests")

Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]

_BODY = orjson.dumps(
    {
        "error": {
            "message": "The server had an error while processing the request.",
            "type": "server_error",
            "param": None,
            "code": "server_error",
        }
    }
)


def guarded(app: App) -> App:
    """``app``, whose exceptions end the response instead of reaching the server."""

    async def application(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        state = {"started": False, "finished": False}

        async def tracked(message: Mapping[str, Any]) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                state["started"] = True
            elif kind == "http.response.body" and not message.get("more_body"):
                state["finished"] = True
            await send(message)

        try:
            await app(scope, receive, tracked)
        except Exception as exc:
            await _end(scope, send, state, exc)

    return application


async def _end(scope: dict[str, Any], send: Send, state: dict[str, bool], exc: Exception) -> None:
    request_id = str(uuid.uuid4())
    log.error(
        "unhandled error on %s %s (request %s)",
        scope.get("method"),
        str(scope.get("path"))[:200],
        request_id,
        exc_info=exc,
    )
    try:
        if not state["started"]:
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(_BODY)),
                (b"x-request-id", request_id.encode()),
            ]
            await send({"type": "http.response.start", "status": 500, "headers": headers})
            await send({"type": "http.response.body", "body": _BODY})
        elif not state["finished"]:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except Exception:
        # The connection is gone or the server refuses: nothing left to tell.
        log.debug("request %s: the response could not be ended", request_id, exc_info=True)
