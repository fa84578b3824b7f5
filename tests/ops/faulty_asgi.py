"""The project's application with three paths that fail on purpose, for
tests/ops/test_app_errors.py: a bug before the response starts, one after,
and a view of the server's own connection table and of whether the loop
that reaps it is still scheduled."""

from __future__ import annotations

import gc
from typing import Any

import orjson
from channels.routing import ProtocolTypeRouter

from config.asgi import http_application
from config.guard import guarded


async def faulty(scope: dict[str, Any], receive: Any, send: Any) -> None:
    path = scope["path"]
    if path == "/boom":
        raise RuntimeError("a bug before the response started")
    if path == "/boom-after-start":
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"data: one\n\n", "more_body": True})
        raise TypeError("a bug after the response started")
    if path == "/connections":
        from daphne.server import Server
        from twisted.internet import reactor

        servers = [o for o in gc.get_objects() if isinstance(o, Server)]
        # Daphne's reaper reschedules itself at the end of each pass; one
        # that raised is gone from the reactor's pending calls for good.
        pending = [getattr(c.func, "__func__", None) for c in reactor.getDelayedCalls()]
        body = orjson.dumps(
            {
                "connections": sum(len(s.connections) for s in servers),
                "reaping": Server.application_checker in pending,
            }
        )
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await http_application(scope, receive, send)


application = ProtocolTypeRouter({"http": guarded(faulty)})
# Without the guard: what daphne does with an application's exception.
unguarded = ProtocolTypeRouter({"http": faulty})
