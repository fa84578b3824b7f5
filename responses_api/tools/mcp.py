"""A client of remote MCP servers, for the tool loop: list a server's tools,
call one.

The contract the loop relies on:

* :func:`list_tools` returns the server's tools, or raises
  :class:`McpUnavailable` (and nothing else) whatever the server does;
  its message is fit for the ``error`` of an ``mcp_list_tools`` item, and
  the request then fails, as OpenAI's does.
* :func:`call_tool` never raises for anything the server does (a hang, an
  oversized answer, invalid JSON-RPC, a dropped connection, a TLS or
  connection error, an HTTP error status, a refused address): it returns an
  :class:`McpOutcome`, whose ``error`` says what went wrong in one sentence
  and whose ``kind`` and ``code`` classify it (an HTTP status, or a JSON-RPC
  error code).
  A tool that reports its own failure (``isError``) is an outcome with
  ``is_error`` set and its output kept.
* Cancelling the caller's task cancels the session: its connections are
  closed and no task of it is left behind; the ``CancelledError`` goes on.
* Bounds: ``timeout`` covers everything (connecting, the ``initialize``
  handshake, the call and closing); the bytes the server sends are counted as
  they arrive, and the session is aborted past ``ANSWER_FACTOR`` times
  ``max_output_bytes`` (``max_bytes`` for a listing), so a 50 MB answer is
  never held whole; the output text is cut at ``max_output_bytes``, saying so.
* Every connection obeys the backend address policy
  (:mod:`responses_api.catalogue.addresses`), checked at connect time.
* The ``authorization`` token is sent as ``Authorization: Bearer ...``; it
  is never logged, nor in a repr or an error message, and it is taken out
  of whatever the server sends back (a server echoing it would put it in
  the stored response).

Each list or call is a session of its own (connect, initialise, one
request, close), unless it is given the ``sessions`` of its response
(``tools.mcp_sessions``): then one session per server serves the listing and
every call, and closes with the response. Nothing of one organisation's
session outlives its response.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from responses_api.catalogue.addresses import AddressPolicy, backend_policy
from responses_api.tools.connection import Guard, UrlInvalid, http_client, url_error
from responses_api.tools.logs import hiding, redact
from responses_api.tools.outcome import describe_failure, failure_code, http_status, output_text

logger = logging.getLogger(__name__)

Transport = Literal["streamable_http", "sse", "auto"]
# What a tool listing may take: schemas of a few hundred tools.
LIST_TOOLS_MAX_BYTES = 4 * 1024 * 1024
# Pages of a tool listing followed at most (a server paging forever).
LIST_TOOLS_MAX_PAGES = 20
# A call's answer may take this many times max_output_bytes on the wire.
ANSWER_FACTOR = 4
# Headers the HTTP client and the MCP transport set; a client's are dropped.
TRANSPORT_HEADERS = frozenset(
    {
        "host",
        "connection",
        "content-length",
        "transfer-encoding",
        "content-type",
        "accept",
        "accept-encoding",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    }
)


@dataclass(frozen=True)
class McpServer:
    """One remote MCP server as a request names it. ``headers`` and
    ``authorization`` are the client's secrets: out of the repr, and any
    header value of 8 characters or more is taken out of outputs and error
    messages like the token."""

    label: str
    url: str
    transport: Transport = "auto"
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    authorization: str | None = field(default=None, repr=False)
    allow_private: bool = False
    # A policy already made (the catalogue's resolution of the request's
    # tool); without it, the backend policy for ``allow_private``.
    policy: AddressPolicy | None = None

    def request_headers(self) -> dict[str, str]:
        """The client's headers but those of HTTP and of the MCP transport
        itself, and the authorization as a bearer token, which replaces an
        ``Authorization`` of the headers."""
        reserved = TRANSPORT_HEADERS | ({"authorization"} if self.authorization else set())
        headers = {k: v for k, v in self.headers.items() if k.lower() not in reserved}
        if self.authorization:
            headers["Authorization"] = f"Bearer {self.authorization}"
        return headers

    def secrets(self) -> list[str]:
        """What must not come back in an output or an error message."""
        found = [self.authorization] if self.authorization else []
        found += [value for value in self.headers.values() if len(value) >= 8]
        # A key some servers take in the URL's query.
        with contextlib.suppress(ValueError):
            if len(query := urlsplit(self.url).query) >= 8:
                found.append(query)
        return found


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool


@dataclass(frozen=True)
class McpOutcome:
    """What a tool call gave: its output text, or why there is none."""

    output: str = ""
    error: str | None = None
    is_error: bool = False
    # How the session failed, for the item's error object: ``http`` (``code``
    # the server's HTTP status) or ``protocol`` (``code`` a JSON-RPC error
    # code). None when the tool ran, even if it reported an error.
    kind: Literal["protocol", "http"] | None = None
    code: int | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


class Sessions(Protocol):
    """Sessions kept open across lists and calls (``tools.mcp_sessions``)."""

    def guard(self, server: McpServer, limit: int, scope: anyio.CancelScope) -> Guard: ...

    def session(
        self, server: McpServer
    ) -> contextlib.AbstractAsyncContextManager[ClientSession]: ...


class McpUnavailable(Exception):
    """The server's tools could not be listed; the message says why, with no
    secret in it. ``http_status``: the server's HTTP error status, when that
    is what failed (OpenAI's 424 for a failed listing names it)."""

    def __init__(self, server_label: str, message: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.server_label = server_label
        self.message = message
        self.http_status = http_status


# ``timeout`` is a parameter, not the caller's cancel scope: running out of
# time is an answer (McpUnavailable, an McpOutcome), not a cancellation.
async def list_tools(
    server: McpServer,
    *,
    timeout: float,  # noqa: ASYNC109
    max_bytes: int = LIST_TOOLS_MAX_BYTES,
    sessions: Sessions | None = None,
) -> list[McpTool]:
    """The server's tools, following the listing's pages."""
    tools: list[mcp_types.Tool] = []
    with hiding(server.secrets()), anyio.move_on_after(timeout) as scope:
        guard = _begun(server, max_bytes, scope, sessions)
        try:
            async with _used(server, guard, timeout, sessions) as session:
                cursor: str | None = None
                for _ in range(LIST_TOOLS_MAX_PAGES):
                    params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except Exception as exc:
            raise _unavailable(server, guard, exc, timeout) from None
    if scope.cancelled_caught:
        raise _unavailable(server, guard, None, timeout)
    return [_tool(tool) for tool in tools]


async def call_tool(
    server: McpServer,
    name: str,
    arguments: dict[str, Any],
    *,
    timeout: float,  # noqa: ASYNC109
    max_output_bytes: int,
    sessions: Sessions | None = None,
) -> McpOutcome:
    """Call one tool; see the module's docstring for what may come back."""
    # The wire may carry more than the text: the JSON-RPC envelope, escapes,
    # and the structured copy of the output many servers add.
    limit = ANSWER_FACTOR * max_output_bytes + 256 * 1024
    result: mcp_types.CallToolResult | None = None
    with hiding(server.secrets()), anyio.move_on_after(timeout) as scope:
        guard = _begun(server, limit, scope, sessions)
        try:
            async with _used(server, guard, timeout, sessions) as session:
                result = await session.call_tool(name, arguments, read_timeout_seconds=timeout)
        # Whatever the server does is an outcome, never the loop's exception:
        # the SDK raises errors of its own, httpx2's and ExceptionGroups.
        except Exception as exc:
            return _failed(server, guard, exc, timeout)
    if result is None:
        return _failed(server, guard, None, timeout)
    secrets = server.secrets()
    return McpOutcome(
        output=redact(output_text(result, max_output_bytes), secrets),
        is_error=bool(result.is_error),
    )


def _begun(
    server: McpServer, limit: int, scope: anyio.CancelScope, sessions: Sessions | None
) -> Guard:
    if sessions is not None:
        return sessions.guard(server, limit, scope)
    guard = server_guard(server, limit)
    guard.scope = scope
    return guard


def _used(
    server: McpServer, guard: Guard, timeout: float, sessions: Sessions | None
) -> contextlib.AbstractAsyncContextManager[ClientSession]:
    """The response's session of ``server``, or one of its own."""
    if sessions is not None:
        return sessions.session(server)
    return open_session(server, guard, timeout)


def server_guard(server: McpServer, limit: int) -> Guard:
    policy = server.policy or backend_policy(allow_private=server.allow_private)
    return Guard(policy, limit)


@contextlib.asynccontextmanager
async def open_session(
    server: McpServer, guard: Guard, within: float
) -> AsyncIterator[ClientSession]:
    """An initialised session, over the server's transport. ``auto`` tries
    Streamable HTTP first and falls back to SSE (the older transport) when
    the server refuses the ``initialize`` POST with a 4xx."""
    if problem := url_error(server.url):
        raise UrlInvalid(problem)
    kinds: tuple[Transport, ...] = (
        ("streamable_http", "sse") if server.transport == "auto" else (server.transport,)
    )
    for attempt, kind in enumerate(kinds):
        async with contextlib.AsyncExitStack() as stack:
            try:
                session = await _open(stack, kind, server, guard, within)
            except Exception:
                status = guard.status
                # 401 and 403 are about the credentials, not the transport.
                refused = status is not None and 400 <= status < 500 and status not in (401, 403)
                if attempt + 1 < len(kinds) and refused:
                    logger.info("MCP server %s: no Streamable HTTP, trying SSE", server.label)
                    guard.status = None
                    continue
                raise
            yield session
            return


async def _open(
    stack: contextlib.AsyncExitStack,
    kind: Transport,
    server: McpServer,
    guard: Guard,
    within: float,
) -> ClientSession:
    client = http_client(guard, server.request_headers(), within)
    if kind == "sse":

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return client

        streams = sse_client(
            server.url, timeout=within, sse_read_timeout=within, httpx_client_factory=factory
        )
    else:
        await stack.enter_async_context(client)
        streams = streamable_http_client(
            server.url, http_client=client, max_sse_event_size=guard.limit
        )
    read, write = await stack.enter_async_context(streams)
    session = await stack.enter_async_context(
        ClientSession(read, write, read_timeout_seconds=within)
    )
    await session.initialize()
    return session


def _unavailable(
    server: McpServer, guard: Guard, exc: BaseException | None, timeout: float
) -> McpUnavailable:
    message = _failure(server, guard, exc, timeout)
    return McpUnavailable(server.label, message, http_status(exc, guard))


def _failed(
    server: McpServer, guard: Guard, exc: BaseException | None, timeout: float
) -> McpOutcome:
    kind, code = failure_code(exc, guard, timeout=timeout)
    return McpOutcome(error=_failure(server, guard, exc, timeout), kind=kind, code=code)


def _failure(server: McpServer, guard: Guard, exc: BaseException | None, timeout: float) -> str:
    message = describe_failure(exc, guard, timeout=timeout)
    return redact(message, server.secrets())


def _tool(tool: mcp_types.Tool) -> McpTool:
    annotations = tool.annotations
    return McpTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        read_only=bool(annotations and annotations.read_only_hint),
    )
