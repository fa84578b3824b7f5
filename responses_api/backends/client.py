"""HTTP to backends: long-lived httpx transports per backend, kept alive.

Requests go straight to httpx's ``AsyncHTTPTransport`` (its httpcore
connection pool) rather than through ``AsyncClient.send``: the client's
per-request layers — URL merging and parsing in ``build_request``, auth and
redirect handling, cookie extraction, event hooks, its own log line — cost
about a third of a millisecond per call and do nothing for a backend call
(one fixed URL, no cookies, no redirects followed). The URL, headers and
timeouts are built once per backend. Environment proxies are not consulted
(``trust_env`` off): backends are addressed directly.

Transports live on the event loop that made them (httpcore pools are bound to
one loop); a process normally has one loop, tests may have several.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from django.conf import settings

# Connection pools per backend (see ``Upstream.__init__``).
POOLS = 8


class Upstream:
    """One backend's connection pool and its prepared request parts."""

    __slots__ = ("_extensions", "_headers", "_transports", "_turn", "_url", "is_closed")

    def __init__(self, base_url: str, api_key: str) -> None:
        self._url = httpx.URL(base_url.rstrip("/") + "/chat/completions")
        headers = [(b"content-type", b"application/json")]
        if api_key:
            headers.append((b"authorization", f"Bearer {api_key}".encode()))
        self._headers = headers
        timeout = httpx.Timeout(
            connect=settings.SWITCHYARD_CONNECT_TIMEOUT,
            read=settings.SWITCHYARD_READ_TIMEOUT,
            write=30.0,
            pool=settings.SWITCHYARD_CONNECT_TIMEOUT,
        )
        self._extensions = {"timeout": timeout.as_dict()}
        # Several small pools, taken in turn, rather than one large one:
        # httpcore scans every connection of a pool (a readability check on
        # each idle socket) whenever a request starts or a response closes,
        # so one pool costs O(concurrent requests) per request.
        self._transports = [
            httpx.AsyncHTTPTransport(
                trust_env=False,
                limits=httpx.Limits(
                    max_connections=None,
                    max_keepalive_connections=256 // POOLS,
                    keepalive_expiry=60,
                ),
            )
            for _ in range(POOLS)
        ]
        self._turn = 0
        self.is_closed = False

    async def send_chat(self, body: dict[str, Any]) -> httpx.Response:
        """POST ``chat/completions``; the answer's body is left to stream."""
        request = httpx.Request(
            "POST",
            self._url,
            headers=self._headers,
            content=orjson.dumps(body),
            extensions=self._extensions,
        )
        self._turn = turn = (self._turn + 1) % POOLS
        response = await self._transports[turn].handle_async_request(request)
        response.request = request
        return response

    async def aclose(self) -> None:
        self.is_closed = True
        for transport in self._transports:
            await transport.aclose()


_clients: dict[tuple[int, str, str], Upstream] = {}


def get_client(base_url: str, api_key: str) -> Upstream:
    loop_id = id(asyncio.get_running_loop())
    key = (loop_id, base_url, api_key)
    client = _clients.get(key)
    if client is None or client.is_closed:
        client = Upstream(base_url, api_key)
        _clients[key] = client
    return client


async def close_clients() -> None:
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _clients if k[0] == loop_id]:
        client = _clients.pop(key)
        with contextlib.suppress(Exception):
            await client.aclose()


def raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The response body's bytes as they arrive, undecoded.

    The same bytes as ``Response.aiter_raw()`` from the response's own
    stream: ``aiter_raw`` enters a context manager and a re-chunker for each
    chunk, and a chat stream is one chunk per token. httpcore errors are still
    mapped to httpx's exceptions by the stream itself.
    """
    return aiter(response.stream)
