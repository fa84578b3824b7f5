"""HTTP to backends: one long-lived client per backend, connections kept alive.

The relay sends one kind of request (``POST …/chat/completions``) and reads
one kind of answer (an SSE stream or a small JSON error), so it uses this
small HTTP/1.1 client on asyncio's transports rather than httpx: httpx and
httpcore cost about a millisecond of CPU per request and tens of
microseconds per network read (the pool polls every idle socket on each
request), which is most of a relayed request's CPU. The client keeps
httpx's interface where the relay touches it (``status_code``, ``headers``,
``aiter_raw``, ``aread``, ``content``, ``text``, ``aclose``) and raises
httpx's exception classes, so error handling reads the same.

Each read hands over everything the socket delivered, de-chunked, so events
that arrived together are translated and written together. Clients live on
the event loop that made them; a process normally has one loop, tests may
have several.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
from django.conf import settings

MAX_IDLE = 256
_clients: dict[tuple[int, str, str], UpstreamClient] = {}


class _Connection(asyncio.Protocol):
    """One socket to a backend: a receive buffer and a waiter."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, seconds: float) -> None:
        """Until more bytes arrive or the backend closes."""
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(seconds):
                await self.waiter
        except TimeoutError:
            raise httpx.ReadTimeout("The backend did not answer in time.") from None
        finally:
            self.waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class UpstreamResponse:
    def __init__(
        self,
        client: UpstreamClient,
        connection: _Connection,
        status_code: int,
        headers: dict[str, str],
    ) -> None:
        self._client = client
        self._connection = connection
        self.status_code = status_code
        self.headers = headers
        self._content: bytes | None = None
        self.complete = False
        self._reusable = "close" not in headers.get("connection", "").lower()
        encoding = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in encoding
        self._left = 0  # bytes left in the current chunk, or in a content-length body
        self._until_close = False
        self._crlf = False  # a chunk's trailing CRLF is still to be read
        self._trailers = False
        if not self._chunked:
            length = headers.get("content-length")
            if length is not None:
                try:
                    self._left = int(length)
                except ValueError:
                    raise httpx.RemoteProtocolError("invalid Content-Length") from None
                self.complete = self._left == 0
            elif status_code in (204, 304) or status_code < 200:
                self.complete = True
            else:
                self._until_close = True
                self._reusable = False

    def _take(self) -> bytes:
        """Decode what the buffer holds of the body."""
        buffer = self._connection.buffer
        if not self._chunked:
            if self._until_close:
                data = bytes(buffer)
                buffer.clear()
                return data
            n = min(self._left, len(buffer))
            data = bytes(buffer[:n])
            del buffer[:n]
            self._left -= n
            self.complete = self._left == 0
            return data
        out = []
        while True:
            if self._left:
                n = min(self._left, len(buffer))
                if not n:
                    break
                out.append(bytes(buffer[:n]))
                del buffer[:n]
                self._left -= n
                self._crlf = not self._left
                continue
            end = buffer.find(b"\r\n")
            if end < 0:
                break
            line = bytes(buffer[:end])
            del buffer[: end + 2]
            if self._crlf:
                if line:
                    raise httpx.RemoteProtocolError("malformed chunked body")
                self._crlf = False
                continue
            if self._trailers:
                if not line:  # the blank line after the last chunk (and any trailers)
                    self.complete = True
                    break
                continue
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError:
                raise httpx.RemoteProtocolError("malformed chunk size") from None
            if size == 0:
                self._trailers = True
            else:
                self._left = size
        return b"".join(out)

    async def aiter_raw(self):
        connection = self._connection
        timeout = settings.SWITCHYARD_READ_TIMEOUT
        while not self.complete:
            data = self._take()
            if data:
                yield data
                continue
            if self.complete:
                break
            if connection.closed:
                if self._until_close:
                    self.complete = True
                    break
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            await connection.wait(timeout)
        self._release()

    async def aread(self) -> bytes:
        if self._content is None:
            self._content = b"".join([chunk async for chunk in self.aiter_raw()])
        return self._content

    @property
    def content(self) -> bytes:
        return self._content or b""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def _release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self.complete and self._reusable and not connection.closed and not connection.buffer:
            self._client.put_back(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        if self._connection is not None:
            if not self.complete:
                self._connection.close()  # unread body: the connection can't be reused
            self._release()


class UpstreamClient:
    """Keep-alive HTTP/1.1 connections to one backend."""

    def __init__(self, base_url: str, api_key: str) -> None:
        parts = urlsplit(base_url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        path = parts.path.rstrip("/") + "/chat/completions"
        default_port = self.port == (443 if self.tls else 80)
        host_header = self.host if default_port else f"{self.host}:{self.port}"
        if ":" in self.host and not default_port:
            host_header = f"[{self.host}]:{self.port}"
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {host_header}\r\naccept: */*\r\n"
            "content-type: application/json\r\nuser-agent: switchyard\r\n"
        )
        if api_key:
            head += f"authorization: Bearer {api_key}\r\n"
        self._head = head.encode("latin-1")
        self._idle: list[_Connection] = []
        self._ssl: ssl.SSLContext | None = None
        self.is_closed = False

    def build(self, body: bytes) -> bytes:
        return self._head + b"content-length: %d\r\n\r\n" % len(body) + body

    def put_back(self, connection: _Connection) -> None:
        if len(self._idle) < MAX_IDLE and not self.is_closed:
            self._idle.append(connection)
        else:
            connection.close()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self.tls and self._ssl is None:
            self._ssl = _ssl_context()
        try:
            async with asyncio.timeout(settings.SWITCHYARD_CONNECT_TIMEOUT):
                _, connection = await loop.create_connection(
                    _Connection, self.host, self.port, ssl=self._ssl
                )
        except TimeoutError:
            raise httpx.ConnectTimeout("Timed out connecting to the backend.") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from None
        return connection

    async def send(self, request: bytes, stream: bool = True) -> UpstreamResponse:
        while self._idle:
            connection = self._idle.pop()
            if connection.closed or connection.buffer:
                connection.close()
                continue
            try:
                return await self._exchange(connection, request, stream)
            except _Stale:
                continue  # the backend closed the idle connection: take a fresh one
        try:
            return await self._exchange(await self._connect(), request, stream)
        except _Stale:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response."
            ) from None

    async def _exchange(
        self, connection: _Connection, request: bytes, stream: bool
    ) -> UpstreamResponse:
        assert connection.transport is not None
        connection.transport.write(request)
        buffer = connection.buffer
        timeout = settings.SWITCHYARD_READ_TIMEOUT
        try:
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end >= 0:
                    head = bytes(buffer[:end])
                    del buffer[: end + 4]
                    status, headers = _parse_head(head)
                    if 100 <= status < 200:
                        continue  # 100 Continue and friends precede the answer
                    break
                if connection.closed:
                    raise _Stale
                await connection.wait(timeout)
            response = UpstreamResponse(self, connection, status, headers)
        except BaseException:
            connection.close()  # half an answer (or none): never reused
            raise
        if response.complete:
            response._release()
        elif not stream:
            await response.aread()
        return response

    async def aclose(self) -> None:
        self.is_closed = True
        while self._idle:
            self._idle.pop().close()


class _Stale(Exception):
    """The connection closed before any byte of the answer."""


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise httpx.RemoteProtocolError("malformed status line from the backend") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def _ssl_context() -> ssl.SSLContext:
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


def get_client(base_url: str, api_key: str) -> UpstreamClient:
    loop_id = id(asyncio.get_running_loop())
    key = (loop_id, base_url, api_key)
    client = _clients.get(key)
    if client is None or client.is_closed:
        client = UpstreamClient(base_url, api_key)
        _clients[key] = client
    return client


async def close_clients() -> None:
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _clients if k[0] == loop_id]:
        client = _clients.pop(key)
        with contextlib.suppress(Exception):
            await client.aclose()


def chat_request(client: UpstreamClient, body: dict[str, Any]) -> bytes:
    return client.build(orjson.dumps(body))
