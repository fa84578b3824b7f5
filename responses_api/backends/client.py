"""HTTP to backends: aiohttp's connection pool and parser, httpx's types.

Each backend has one long-lived ``aiohttp`` session holding a connection
pool with keep-alive; aiohttp's C parser decodes the chunked body and hands
over everything that arrived in one read, where httpcore's pure-Python h11
produced one event per chunk, i.e. per token (bench/README.md, optimisation
11). The relay deals only in httpx objects and exceptions: the answer is an
``httpx.Response`` whose stream reads the aiohttp response, and aiohttp's
errors are raised as the httpx classes that failover tells apart (a refused
connection, a dropped one, a timeout).

A backend call builds no ``httpx.Request``: the URL, headers and timeouts
are prepared once per backend, and the session keeps no cookies (a backend's
cookie must not follow one organisation's request into another's, and
matching a jar costs as much as the rest of the request's preparation).
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
from multidict import CIMultiDict
from yarl import URL


class Upstream:
    """One backend's connection pool and its prepared request parts."""

    __slots__ = ("_headers", "_session", "_timeout", "_url", "is_closed")

    def __init__(self, base_url: str, api_key: str) -> None:
        self._url = URL(base_url.rstrip("/") + "/chat/completions")
        headers = CIMultiDict({"content-type": "application/json"})
        # The body is relayed as it arrives, undecoded: ask for it uncompressed
        # (aiohttp would otherwise offer gzip).
        headers["accept-encoding"] = "identity"
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._timeout = aiohttp.ClientTimeout(
            sock_connect=settings.SWITCHYARD_CONNECT_TIMEOUT,
            sock_read=settings.SWITCHYARD_READ_TIMEOUT,
            connect=settings.SWITCHYARD_CONNECT_TIMEOUT,
        )
        self._session: aiohttp.ClientSession | None = None
        self.is_closed = False

    async def send_chat(self, body: dict[str, Any]) -> httpx.Response:
        """POST ``chat/completions``; the answer's body is left to stream."""
        if self._session is None:
            self._session = _session()
        try:
            response = await self._session.post(
                self._url,
                data=orjson.dumps(body),
                headers=self._headers,
                allow_redirects=False,
                auto_decompress=False,
                timeout=self._timeout,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _httpx_error(exc) from exc
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        self.is_closed = True
        if self._session is not None:
            await self._session.close()


class _Body(httpx.AsyncByteStream):
    """An aiohttp response's body as an httpx stream: what each read
    brought, undecoded."""

    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            while data := await content.readany():
                yield data
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _httpx_error(exc) from exc

    async def aclose(self) -> None:
        # An answer not read to its end closes its connection (the backend
        # sees the client leave); a complete one goes back to the pool.
        self._response.release()


# Most specific first: aiohttp's timeouts are connection errors too.
_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientConnectionResetError, httpx.WriteError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.InvalidUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (TimeoutError, httpx.ReadTimeout),
)


def _httpx_error(exc: BaseException) -> httpx.TransportError:
    """httpx's class for what went wrong with the backend. Anything else
    aiohttp reports (a malformed status line or header) is the backend
    breaking the protocol."""
    for cause, error in _ERRORS:
        if isinstance(exc, cause):
            return error(str(exc) or type(exc).__name__)
    return httpx.RemoteProtocolError(str(exc) or type(exc).__name__)


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
    return aiohttp.ClientSession(
        connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar()
    )


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
    piece. Errors are httpx's (see :func:`_httpx_error`).
    """
    return aiter(response.stream)
