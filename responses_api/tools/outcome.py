"""What an MCP server's answer becomes: the output text the model reads,
or one sentence saying why there is none.

A failure is described from what the session's guard saw on the wire (an
address refusal, an answer past the cap or compressed, an HTTP error
status) before the
exception: the SDK turns those into generic JSON-RPC errors. The sentences
are the client's own; of the server's words only a JSON-RPC error's message
is kept, shortened. Exception texts are not used: they may carry a URL.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Literal

import anyio
import httpx2
import mcp_types
import orjson
import pydantic
from mcp.shared.exceptions import MCPError

from responses_api.tools.connection import SUBJECT, Guard, UrlInvalid

# How much of a server's own error message is kept.
SERVER_MESSAGE_CHARS = 300
_BROKEN = (
    httpx2.RemoteProtocolError,
    httpx2.ReadError,
    httpx2.WriteError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)


def output_text(result: mcp_types.CallToolResult, limit: int) -> str:
    """The result's text content, joined; any other content is described in
    a line of its own. Cut at ``limit`` bytes (UTF-8), saying so."""
    parts = [_describe(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(orjson.dumps(result.structured_content).decode())
    return _cut("\n".join(parts), limit)


def _describe(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource: {resource.uri}, {resource.mime_type or 'binary'}]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    marker = f"\n[output cut at {limit} bytes]"
    kept = data[: max(0, limit - len(marker))].decode(errors="ignore")
    return kept + marker


def describe_failure(exc: BaseException | None, guard: Guard, *, timeout: float) -> str:
    """Why a session failed, in one sentence with no secret and no address
    the server's name resolved to. ``exc`` None: the time ran out."""
    if guard.refusal:
        return guard.refusal
    if guard.aborted:
        return guard.aborted
    if guard.exceeded:
        return f"The {SUBJECT}'s answer exceeded {guard.limit} bytes; the call was aborted."
    leaves = list(_leaves(exc)) if exc is not None else []
    for leaf in leaves:
        if isinstance(leaf, UrlInvalid):
            return f"The {SUBJECT}'s URL is not valid: {leaf}"
    if guard.status in (401, 403):
        return f"The {SUBJECT} refused the authorization (HTTP {guard.status})."
    if guard.status is not None:
        return f"The {SUBJECT} answered HTTP {guard.status}."
    if exc is None:
        return f"The {SUBJECT} did not answer within {timeout:g} seconds."
    for leaf in leaves:
        if described := _described(leaf, timeout):
            return described
    kind = type(leaves[0]).__name__ if leaves else type(exc).__name__
    return f"The {SUBJECT}'s answer could not be understood ({kind})."


def http_status(exc: BaseException | None, guard: Guard) -> int | None:
    """The HTTP error status the server answered with, if that is what
    failed (an OpenAI-like error names it)."""
    if guard.status is not None or exc is None:
        return guard.status
    failed = [leaf for leaf in _leaves(exc) if isinstance(leaf, httpx2.HTTPStatusError)]
    return failed[0].response.status_code if failed else None


def failure_code(
    exc: BaseException | None, guard: Guard, *, timeout: float
) -> tuple[Literal["protocol", "http"], int]:
    """How a failed session is told apart on an ``mcp_call`` item: an HTTP
    error status (``http``), or a JSON-RPC error code (``protocol``) -- the
    server's own, the SDK's request timeout for running out of time, or
    ``CONNECTION_CLOSED`` for a server not reached or not understood. It
    follows :func:`describe_failure`, so the code matches the sentence."""
    if guard.refusal or guard.aborted or guard.exceeded:
        return "protocol", mcp_types.CONNECTION_CLOSED
    leaves = list(_leaves(exc)) if exc is not None else []
    if any(isinstance(leaf, UrlInvalid) for leaf in leaves):
        return "protocol", mcp_types.CONNECTION_CLOSED
    if guard.status is not None:
        return "http", guard.status
    if exc is None:
        return "protocol", mcp_types.REQUEST_TIMEOUT
    for leaf in leaves:
        if _described(leaf, timeout) is None:
            continue
        # The SDK's parse error is its own word for an answer it could not
        # read: the sentence says so, like any answer not understood.
        if isinstance(leaf, MCPError) and leaf.error.code != mcp_types.PARSE_ERROR:
            # The server's word: any integer, and JSON-RPC's are 32-bit. A
            # larger one would not even serialise; it is an answer not understood.
            code = leaf.error.code
            return "protocol", code if -(2**31) <= code < 2**31 else mcp_types.CONNECTION_CLOSED
        if isinstance(leaf, httpx2.HTTPStatusError):
            return "http", leaf.response.status_code
        if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
            return "protocol", mcp_types.REQUEST_TIMEOUT
        break
    return "protocol", mcp_types.CONNECTION_CLOSED


def _described(exc: BaseException, timeout: float) -> str | None:
    if isinstance(exc, MCPError):
        if exc.error.code == mcp_types.PARSE_ERROR:
            return f"The {SUBJECT}'s answer is not valid JSON-RPC."
        if exc.error.code == mcp_types.CONNECTION_CLOSED:
            return f"The connection to the {SUBJECT} broke before the answer was complete."
        said = exc.error.message[:SERVER_MESSAGE_CHARS]
        return f"The {SUBJECT} answered with an error: {said}"
    if isinstance(exc, httpx2.HTTPStatusError):
        status = exc.response.status_code
        if status in (401, 403):
            return f"The {SUBJECT} refused the authorization (HTTP {status})."
        return f"The {SUBJECT} answered HTTP {status}."
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"Could not connect to the {SUBJECT} within {timeout:g} seconds."
    if isinstance(exc, httpx2.ConnectError):
        if any(isinstance(cause, ssl.SSLError) for cause in _causes(exc)):
            return f"The TLS handshake with the {SUBJECT} failed."
        return f"Could not connect to the {SUBJECT}."
    if isinstance(exc, httpx2.TimeoutException | TimeoutError):
        return f"The {SUBJECT} did not answer within {timeout:g} seconds."
    if isinstance(exc, _BROKEN):
        return f"The connection to the {SUBJECT} broke before the answer was complete."
    if isinstance(exc, pydantic.ValidationError | orjson.JSONDecodeError):
        return f"The {SUBJECT}'s answer is not valid JSON-RPC."
    return None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__
