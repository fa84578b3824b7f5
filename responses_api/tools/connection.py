"""The HTTP client under one MCP session: the address policy at connect
time, and a count of the bytes the server sends.

The ``mcp`` SDK speaks HTTP through an ``httpx2.AsyncClient`` it is handed.
The client made here connects through :class:`PolicyBackend`, a network
backend of httpcore2 (the connection layer under httpx2) that resolves the
server's name itself, drops the addresses the backend address policy
(:mod:`responses_api.catalogue.addresses`) refuses and connects to an
address that is left, so a name that resolves to loopback or to the cloud's
metadata service is refused at every new connection, as the backends'
``PolicyResolver`` does. TLS is still verified against the name in the URL.

Every byte read from the server's connections is counted on the session's
:class:`Guard` as it arrives; past the limit the read fails and the
session's cancel scope is cancelled, so an endless or huge answer is never
held whole. The guard also keeps what the SDK turns into generic JSON-RPC
errors (the HTTP status, an address refusal), for the error message.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Iterable
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore2
import httpx2

from responses_api.catalogue import addresses
from responses_api.catalogue.addresses import AddressPolicy, refused_message

SUBJECT = "MCP server"


class UrlInvalid(Exception):
    """The server's URL is no http(s) URL a connection can be made to."""


def url_error(url: str) -> str | None:
    """Why ``url`` cannot be an MCP server's URL, or None. Unlike a
    backend's base URL it may have a query: some servers take their key
    there. Its address is judged when the connection is made."""
    if not url.startswith(("http://", "https://")):
        return "use an http:// or https:// URL."
    if len(url) > 2000 or any(c.isspace() for c in url):
        return "enter a valid URL."
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is no number)
    except ValueError:
        return "enter a valid URL."
    if not parts.hostname:
        return "enter a valid URL."
    if "@" in parts.netloc:
        return "give credentials as headers or the authorization, not in the URL."
    return None


class Guard:
    """What one MCP session may receive, and what went wrong on its wire."""

    __slots__ = ("aborted", "limit", "policy", "received", "refusal", "scope", "status")

    def __init__(self, policy: AddressPolicy, limit: int) -> None:
        self.policy = policy
        self.limit = limit
        self.received = 0
        # The first address refusal, said without the addresses a name resolved to.
        self.refusal: str | None = None
        # The last HTTP error status a POST was answered with, if any.
        self.status: int | None = None
        # Cancelled when the answer goes past the limit.
        self.scope: anyio.CancelScope | None = None
        # Why the session was cut short on seeing an answer's headers.
        self.aborted: str | None = None

    def begin(self, limit: int, scope: anyio.CancelScope) -> None:
        """Start a list or a call on a session kept open (``tools.mcp_sessions``):
        its bytes and what goes wrong are its own."""
        self.limit, self.scope = limit, scope
        self.received = 0
        self.refusal = self.status = self.aborted = None

    @property
    def exceeded(self) -> bool:
        return self.received > self.limit

    def count(self, size: int) -> None:
        self.received += size
        if self.exceeded:
            if self.scope is not None:
                self.scope.cancel()
            raise httpcore2.ReadError(f"The {SUBJECT}'s answer exceeded {self.limit} bytes.")

    def abort(self, message: str) -> httpx2.DecodingError:
        self.aborted = self.aborted or message
        if self.scope is not None:
            self.scope.cancel()
        return httpx2.DecodingError(message)

    def refuse(self, message: str) -> httpcore2.ConnectError:
        self.refusal = self.refusal or message
        return httpcore2.ConnectError(message)


class CountingStream(httpcore2.AsyncNetworkStream):
    """A connection whose received bytes count against the session's guard."""

    def __init__(self, stream: httpcore2.AsyncNetworkStream, guard: Guard) -> None:
        self._stream = stream
        self._guard = guard

    # httpcore2's interface names its parameters ``timeout``.
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        data = await self._stream.read(max_bytes, timeout)
        self._guard.count(len(data))
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore2.AsyncNetworkStream:
        secured = await self._stream.start_tls(ssl_context, server_hostname, timeout)
        return CountingStream(secured, self._guard)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class PolicyBackend(httpcore2.AsyncNetworkBackend):
    """Connections only to the addresses the guard's policy allows."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        policy = self._guard.policy
        if policy.refuses_name(host):
            raise self._guard.refuse(
                refused_message(host, "cloud metadata", resolved=False, subject=SUBJECT)
            )
        if _is_ip(host):
            if kind := policy.refusal(host):
                raise self._guard.refuse(
                    refused_message(host, kind, resolved=False, subject=SUBJECT)
                )
            found = [host]
        else:
            # The blocking lookup that saving a backend uses (and that the
            # tests replace: no test queries a DNS server), off the loop.
            found = await anyio.to_thread.run_sync(addresses.resolve, host, port)
            if not found:
                raise httpcore2.ConnectError(f"The {SUBJECT}'s name {host} does not resolve.")
        allowed = [address for address in found if policy.refusal(address) is None]
        if not allowed:
            kind = next((k for a in found if (k := policy.refusal(a))), "refused")
            raise self._guard.refuse(refused_message(host, kind, resolved=True, subject=SUBJECT))
        failure: Exception | None = None
        for address in allowed:
            try:
                stream = await self._backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
                continue
            return CountingStream(stream, self._guard)
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("An MCP server is reached over TCP only.")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


@cache
def tls_context() -> ssl.SSLContext:
    """The system's trust store, verified as httpx2 does. Made once: loading
    the certificates takes tens of milliseconds of the event loop, which a
    context per session would pay at every call. A context is safe to share
    between connections; none of its settings change after this."""
    return httpx2.create_ssl_context(trust_env=False)


class PolicyTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a pool whose connections are made by
    :class:`PolicyBackend`. httpx2 takes no network backend of its own
    accord: the pool it made is replaced by an equal one that does."""

    def __init__(self, guard: Guard) -> None:
        super().__init__(verify=tls_context(), trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=tls_context(),
            max_connections=4,
            max_keepalive_connections=2,
            network_backend=PolicyBackend(guard),
        )


def http_client(guard: Guard, headers: dict[str, str], within: float) -> httpx2.AsyncClient:
    """The client of one MCP session. No proxy from the environment (it
    would bypass the policy), no cookies kept between sessions, no redirect
    followed but within the server's origin (the SDK's own rule), no
    compressed answer."""

    async def inspect(response: httpx2.Response) -> None:
        # The POSTs carry the JSON-RPC messages. A GET is either the
        # optional stream of Streamable HTTP (a 405 there is no failure) or
        # the SSE transport's stream, whose error status the SDK raises.
        if response.status_code >= 400 and response.request.method == "POST":
            guard.status = response.status_code
        # httpx2 decodes whatever the server says it encoded, though asked
        # for none: 50 KB of gzip would be 50 MB past the byte count.
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            raise guard.abort(f"The {SUBJECT} sent a compressed answer, which is refused.")

    return httpx2.AsyncClient(
        transport=PolicyTransport(guard),
        headers={"Accept-Encoding": "identity", **headers},
        timeout=httpx2.Timeout(within),
        trust_env=False,
        follow_redirects=False,
        event_hooks={"response": [inspect]},
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
