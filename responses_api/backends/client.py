"""HTTP to backends: httpx requests and responses over aiohttp connections.

Each backend has one long-lived ``httpx_aiohttp.AiohttpTransport`` (the
httpx transport the OpenAI SDK offers for the same reason), holding an
``aiohttp`` connection pool with keep-alive. The relay deals only in httpx
objects and exceptions; underneath, aiohttp's C parser decodes the chunked
body and hands over everything that arrived in one read, where httpcore's
pure-Python h11 produced one event per chunk, i.e. per token: the transport
halved the CPU time per relayed token and cut a third off a non-streaming
request (bench/README.md, optimisation 11).

Requests go straight to the transport rather than through
``AsyncClient.send``: the client's per-request layers (URL merging, auth and
redirect handling, cookies, event hooks, its own log line) do nothing for a
backend call. The URL, headers and timeouts are built once per backend.
Environment proxies are not consulted: backends are addressed directly.

Pools live on the event loop that made them; a process normally has one
loop, tests may have several.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import orjson
from django.conf import settings
from httpx_aiohttp import AiohttpTransport


class Upstream:
    """One backend's connection pool and its prepared request parts."""

    __slots__ = ("_extensions", "_headers", "_transport", "_url", "is_closed")

    def __init__(self, base_url: str, api_key: str) -> None:
        self._url = httpx.URL(base_url.rstrip("/") + "/chat/completions")
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._headers = headers
        timeout = httpx.Timeout(
            connect=settings.SWITCHYARD_CONNECT_TIMEOUT,
            read=settings.SWITCHYARD_READ_TIMEOUT,
            write=30.0,
            pool=settings.SWITCHYARD_CONNECT_TIMEOUT,
        )
        self._extensions = {"timeout": timeout.as_dict()}
        self._transport = AiohttpTransport(client=_session)
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
        try:
            return await self._transport.handle_async_request(request)
        except httpx.TransportError as exc:
            raise precise_error(exc) from exc.__cause__

    async def aclose(self) -> None:
        self.is_closed = True
        await self._transport.aclose()


def precise_error(exc: httpx.TransportError) -> httpx.TransportError:
    """httpx's own class for what went wrong, from aiohttp's error.

    The transport maps every connection-level aiohttp error to
    ``ConnectTimeout`` and a connect timeout to a plain timeout; failover
    (``backends/failover.py``) needs to tell a refused connection, a dropped
    one and a timeout apart.
    """
    cause = exc.__cause__
    message = str(cause or exc)
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)
    if isinstance(cause, aiohttp.SocketTimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(cause, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message)
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError(message)
    if isinstance(cause, aiohttp.ClientOSError):
        return httpx.ReadError(message)
    return exc


# Idle keep-alive connections kept per backend. A burst of a thousand
# streams would otherwise leave a thousand idle sockets open on the backend
# and about 10 MB in the web process for the keep-alive time.
IDLE_CONNECTIONS = 64


class _Connector(aiohttp.TCPConnector):
    """aiohttp's pool, with a bound on idle connections (aiohttp has none;
    httpx's ``max_keepalive_connections``): a connection released while
    ``IDLE_CONNECTIONS`` are already idle is closed."""

    def _release(self, key, protocol, *, should_close: bool = False) -> None:
        idle = self._conns.get(key)
        if idle is not None and len(idle) >= IDLE_CONNECTIONS:
            should_close = True
        super()._release(key, protocol, should_close=should_close)


def _session() -> aiohttp.ClientSession:
    # No bound on connections in use: a backend's own concurrency limit
    # (routing) is what queues requests.
    connector = _Connector(limit=0, keepalive_timeout=60, ttl_dns_cache=60)
    return aiohttp.ClientSession(connector=connector, trust_env=False)


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
    stream, without ``aiter_raw``'s context manager and re-chunker per
    piece. Errors are httpx's, as the transport maps them (see
    :func:`precise_error` for naming them).
    """
    return aiter(response.stream)
