"""The floor: Switchyard's server and client stack with nothing in between.

An ASGI application that forwards each Chat Completions request to the
backend unchanged and relays the answer as it arrives, served the way a web
process is served (``config.serve``: daphne on uvloop, the same patches) and
reaching the backend through aiohttp with the same pool settings. No key, no
validation, no translation, no usage row, no Redis.

``bench/run.py --floor`` measures it as a column beside the gateway: what
the gateway adds over the floor is its own work; what the floor adds over a
direct connection is the price of a Python server and client on this machine,
which no gateway built on them goes below. ``GET /metrics`` answers with
the process's Prometheus metrics, so the floor's event-loop lag
(``responses_api/runtime/loop_monitor.py``, installed by ``config.serve``) is read
the same way as a web process's.

    python -m config.serve -b 127.0.0.1 -p 8300 bench.floor:app
    (with FLOOR_BACKEND=http://127.0.0.1:8200)
"""

from __future__ import annotations

import gc
import os
from typing import Any

import aiohttp

# The server patches read the body limit from Switchyard's settings.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
BACKEND = os.environ.get("FLOOR_BACKEND", "http://127.0.0.1:8200").rstrip("/")
_session: aiohttp.ClientSession | None = None


def session() -> aiohttp.ClientSession:
    global _session
    if _session is None:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60, ttl_dns_cache=60)
        _session = aiohttp.ClientSession(
            connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
        )
    return _session


async def _body(receive: Any) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def app(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = await _body(receive)
    if scope["path"] == "/metrics":
        await _metrics(send)
        return
    async with session().post(
        BACKEND + scope["path"], data=body, headers={"content-type": "application/json"}
    ) as upstream:
        kind = upstream.headers.get("content-type", "application/json")
        if not kind.startswith("text/event-stream"):
            data = await upstream.read()
            headers = [(b"content-type", kind.encode()), (b"content-length", b"%d" % len(data))]
            start = {"type": "http.response.start", "status": upstream.status, "headers": headers}
            await send(start)
            await send({"type": "http.response.body", "body": data})
            return
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": upstream.status, "headers": headers})
        async for chunk in upstream.content.iter_any():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


async def _metrics(send: Any) -> None:
    from prometheus_client import generate_latest

    data = generate_latest()
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(data))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


# The collector as config/asgi.py sets it for a web process: the modules
# loaded at start-up out of its sight, the youngest generation collected
# every 5,000 allocations. Left at Python's defaults, a full collection
# held this process for about 60 ms once in each run of 3,000 requests at
# concurrency 32, and set the floor's p99 there.
gc.freeze()
gc.set_threshold(5_000, 10, 10)
