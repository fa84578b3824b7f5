"""HTTP to backends: chat calls and health probes, on aiohttp.

**Why aiohttp, not httpx.** A relayed token is one chunk of the backend's
chunked body. aiohttp's parser is C (llhttp) and hands over everything that
arrived in one socket read; httpx's httpcore runs every chunk through h11's
pure-Python reader, an event object and an anyio cancel scope. Measured
with ``bench/instructions.py`` on this code base (bench/README.md, 26.),
httpx costs the event loop far more instructions per non-streamed request
and more CPU per relayed token than aiohttp. httpx stays what the tests'
clients use.

**What the rest of Switchyard sees** is this module's own interface:
:class:`Answer` (status, headers, an async iterator of body bytes, close)
and the :class:`BackendError` classes; no aiohttp type leaves the module.

Each backend has one long-lived session per event loop with a keep-alive
pool. Chat calls and probes use sessions made by one function
(:func:`_session`), so both have the same settings: environment proxies
are not consulted (backends are addressed directly), TLS is verified with
the system's trust store, no cookie is kept (a backend's cookie must not
follow one organisation's request into another's), and bodies are relayed
undecoded (``Accept-Encoding: identity``).

Every connection obeys the backend's address policy
(:mod:`responses_api.catalogue.addresses`): a name is resolved through
:class:`~responses_api.catalogue.addresses.PolicyResolver`, an IP literal is
judged before any request, and a refusal is :class:`BackendAddressRefused`
with nothing sent. An error answer's body is read up to ``ERROR_BODY_LIMIT``
bytes, then the connection is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson
from django.conf import settings
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from responses_api.catalogue.addresses import (
    AddressPolicy,
    AddressRefused,
    PolicyResolver,
    backend_policy,
    literal_refusal,
)
from responses_api.runtime import telemetry

# An idle keep-alive connection is closed after this long. A burst of a
# thousand streams leaves as many idle sockets (memory in this process, and
# a slot on the backend); aiohttp offers no bound on their
# number, so the time bounds them. Shorter than the 5 s after which
# llama.cpp's server and uvicorn (vLLM's, SGLang's) close an idle
# connection themselves: past that, a reuse meets a closed socket, or one
# closing as the request goes out.
KEEPALIVE_SECONDS = 4.0
# What is read of an error answer's body (for its classification and the
# usage row); a backend answering 400 MB of error must not take as much
# memory here.
ERROR_BODY_LIMIT = 64 * 1024
# What is read of a health probe's answer: a model list, never this long.
PROBE_BODY_LIMIT = 1024 * 1024


class BackendError(Exception):
    """The backend could not be talked to (not: it answered with an error)."""


class BackendUnreachable(BackendError):
    """The connection was refused or could not be made in time; nothing was sent."""


class BackendAddressRefused(BackendUnreachable):
    """The backend's address is one its policy refuses; nothing was sent."""


class BackendDisconnected(BackendError):
    """The connection broke, or the backend broke the HTTP protocol."""


class BackendTimeout(BackendError):
    """The backend stopped sending for longer than the read timeout."""


class Answer:
    """A backend's HTTP answer whose body is read as it arrives."""

    __slots__ = ("_response", "_trace", "complete", "headers", "status")

    def __init__(
        self, response: aiohttp.ClientResponse, trace: telemetry.BackendCall | None = None
    ) -> None:
        self._response = response
        self._trace = trace
        self.status: int = response.status
        self.headers: Mapping[str, str] = response.headers
        # Set by the reader once the answer is complete (a stream's
        # ``[DONE]``), even if the body's last bytes have not arrived.
        self.complete = False

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as each read brought them, undecoded."""
        content = self._response.content
        try:
            while data := await content.readany():
                yield data
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _error(exc) from exc

    async def read(self, limit: int = ERROR_BODY_LIMIT) -> bytes:
        """The body's first ``limit`` bytes. A longer body is not read to
        its end: its connection is closed instead."""
        return await _read_bounded(self._response, limit)

    def close(self) -> None:
        """An answer not read to its end closes its connection, which is
        how the backend learns that the client left; a complete one goes
        back to the pool. Synchronous, so a cancellation cannot skip it.

        A complete answer whose body's end (the last chunk) is still on its
        way is read to its end in the background, briefly: closing it would
        close the connection, and the next request would pay for a new one.
        """
        if self._trace is not None:
            self._trace.end()
            self._trace = None
        if self.complete and not self._response.content.at_eof():
            task = asyncio.get_running_loop().create_task(self._finish())
            _finishing.add(task)
            task.add_done_callback(_finishing.discard)
            return
        self._response.release()

    async def _finish(self) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(FINISH_SECONDS):
                await self._response.read()
        self._response.release()


# How long a complete answer's last bytes are waited for (see Answer.close).
FINISH_SECONDS = 1.0
_finishing: set[asyncio.Task[None]] = set()


class Upstream:
    """One backend's connection pool and its prepared request parts."""

    __slots__ = (
        "_base",
        "_headers",
        "_policy",
        "_refusal",
        "_session",
        "_timeout",
        "_url",
        "is_closed",
    )

    def __init__(self, base_url: str, api_key: str, policy: AddressPolicy | None = None) -> None:
        self._base = base_url.rstrip("/")
        self._url = URL(self._base + "/chat/completions")
        self._headers = _headers(api_key)
        self._policy = policy or backend_policy(allow_private=False)
        # aiohttp never resolves an IP literal: judged here, once.
        self._refusal = literal_refusal(self._url.raw_host, self._policy)
        self._timeout = aiohttp.ClientTimeout(
            sock_connect=settings.SWITCHYARD_CONNECT_TIMEOUT,
            sock_read=settings.SWITCHYARD_READ_TIMEOUT,
            connect=settings.SWITCHYARD_CONNECT_TIMEOUT,
        )
        self._session: aiohttp.ClientSession | None = None
        self.is_closed = False

    async def send_chat(self, body: dict[str, Any], path: str = "/chat/completions") -> Answer:
        """POST ``chat/completions`` (or ``path``: ``/embeddings``); the body is left to stream."""
        if self._refusal is not None:
            raise BackendAddressRefused(self._refusal)
        if self._session is None:
            self._session = _session(self._policy, telemetry.aiohttp_trace_config())
        data = orjson.dumps(body)
        headers, trace = self._headers, None
        url = self._url if path == "/chat/completions" else URL(self._base + path)
        if telemetry.tracer is not None and (request := telemetry.current.get()) is not None:
            trace = request.backend_call(url.raw_host or "", url.port, str(body.get("model")))
            headers = trace.headers(headers)
        for attempt in range(2):
            try:
                response = await self._session.post(
                    url,
                    data=data,
                    headers=headers,
                    allow_redirects=False,
                    auto_decompress=False,
                    timeout=self._timeout,
                    trace_request_ctx=trace,
                )
            except aiohttp.ServerDisconnectedError as exc:
                # Closed before any answer: most often a kept-alive connection
                # the backend closed just as it was reused. Once more, on a
                # new connection (as httpx does); a backend that keeps closing
                # is the caller's to fail over from.
                if attempt:
                    raise _traced(_error(exc), trace) from exc
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise _traced(_error(exc), trace) from exc
            else:
                if trace is not None:
                    trace.answered(response.status)
                return Answer(response, trace)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        self.is_closed = True
        if self._session is not None:
            await self._session.close()


def _headers(api_key: str) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict({"content-type": "application/json"})
    headers["accept-encoding"] = "identity"
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


async def get(
    base_url: str,
    path: str,
    *,
    api_key: str,
    within: float,
    policy: AddressPolicy | None = None,
    text: bool = False,
) -> tuple[int, Any, str]:
    """``GET base_url + path`` for a health probe: status, decoded JSON
    (None when the body is not JSON or longer than ``PROBE_BODY_LIMIT``;
    with ``text``, the body as text, such as Prometheus metrics) and the
    ``server`` header. A probe has a session of its own (probes run in
    short-lived loops of sync callers) made like the chat calls' sessions,
    under the same address policy."""
    status, data, headers = await _utility_call(
        "GET", base_url, path, None, api_key=api_key, within=within, policy=policy, text=text
    )
    server = headers.get("x-simulator-version") or headers.get("server") or ""
    return status, data, server


async def _utility_call(
    method: str,
    base_url: str,
    path: str,
    body: dict[str, Any] | None,
    *,
    api_key: str,
    within: float,
    policy: AddressPolicy | None,
    text: bool = False,
) -> tuple[int, Any, CIMultiDictProxy[str]]:
    """One call to a backend's endpoint other than chat (a probe, its
    tokenizer): status, decoded JSON (None when the body is not JSON or
    longer than ``PROBE_BODY_LIMIT``) and the headers."""
    policy = policy or backend_policy(allow_private=False)
    url = URL(base_url.rstrip("/") + path)
    if refusal := literal_refusal(url.raw_host, policy):
        raise BackendAddressRefused(refusal)
    async with _session(policy) as session:
        try:
            async with session.request(
                method,
                url,
                data=None if body is None else orjson.dumps(body),
                headers=_headers(api_key),
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=within),
            ) as response:
                content = await _read_bounded(response, PROBE_BODY_LIMIT + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _error(exc) from exc
    if text:
        text_body = content[:PROBE_BODY_LIMIT].decode(errors="replace")
        return response.status, text_body, response.headers
    try:
        data = orjson.loads(content) if content and len(content) <= PROBE_BODY_LIMIT else None
    except orjson.JSONDecodeError:
        data = None
    return response.status, data, response.headers


async def _read_bounded(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """At most ``limit`` bytes of the body; the connection of a body left
    unread is closed, not returned to the pool."""
    content = response.content
    parts: list[bytes] = []
    size = 0
    try:
        while size < limit and (data := await content.read(limit - size)):
            parts.append(data)
            size += len(data)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _error(exc) from exc
    if not content.at_eof():
        response.close()
    return b"".join(parts)


# Most specific first: aiohttp's timeouts are connection errors too.
_ERRORS: tuple[tuple[type[BaseException], type[BackendError]], ...] = (
    (aiohttp.ConnectionTimeoutError, BackendUnreachable),
    (aiohttp.SocketTimeoutError, BackendTimeout),
    (aiohttp.ServerTimeoutError, BackendTimeout),
    (aiohttp.ClientConnectorError, BackendUnreachable),
    (TimeoutError, BackendTimeout),
)


def _error(exc: BaseException) -> BackendError:
    """Our class for what went wrong. Anything not listed (a dropped
    connection, a reset, a malformed status line or chunk) is the
    connection breaking."""
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, AddressRefused):
        return BackendAddressRefused(str(exc.os_error))
    for cause, error in _ERRORS:
        if isinstance(exc, cause):
            return error(str(exc) or type(exc).__name__)
    return BackendDisconnected(str(exc) or type(exc).__name__)


def _traced(error: BackendError, trace: telemetry.BackendCall | None) -> BackendError:
    if trace is not None:
        trace.failed(error)
    return error


def _session(
    policy: AddressPolicy, trace_config: aiohttp.TraceConfig | None = None
) -> aiohttp.ClientSession:
    # No bound on connections in use: a backend's own concurrency limit
    # (routing) is what queues requests. Hooks only on a traced process's
    # chat calls (runtime/telemetry.py): untraced, aiohttp makes no call.
    connector = aiohttp.TCPConnector(
        limit=0,
        keepalive_timeout=KEEPALIVE_SECONDS,
        ttl_dns_cache=60,
        resolver=PolicyResolver(policy),
    )
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        trace_configs=[trace_config] if trace_config is not None else None,
    )


_clients: dict[tuple[int, str, str, AddressPolicy], Upstream] = {}


async def post_json(
    base_url: str,
    path: str,
    body: dict[str, Any],
    *,
    api_key: str,
    within: float,
    policy: AddressPolicy | None = None,
) -> tuple[int, Any]:
    """``POST base_url + path`` with a JSON body, for a backend's utility
    endpoints (its tokenizer): status and decoded JSON (None when the body is
    not JSON or longer than ``PROBE_BODY_LIMIT``). A session of its own, made
    like the chat calls' sessions, under the same address policy."""
    status, data, _ = await _utility_call(
        "POST", base_url, path, body, api_key=api_key, within=within, policy=policy
    )
    return status, data


def get_client(base_url: str, api_key: str, *, allow_private: bool = False) -> Upstream:
    """The backend's pool on the running loop (a process normally has one
    loop; tests may have several). ``allow_private`` is the backend's own
    flag; with the platform setting it makes the pool's address policy."""
    policy = backend_policy(allow_private=allow_private)
    key = (id(asyncio.get_running_loop()), base_url, api_key, policy)
    client = _clients.get(key)
    if client is None or client.is_closed:
        client = Upstream(base_url, api_key, policy)
        _clients[key] = client
    return client


async def close_clients() -> None:
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _clients if k[0] == loop_id]:
        client = _clients.pop(key)
        with contextlib.suppress(Exception):
            await client.aclose()
