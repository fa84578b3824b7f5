"""A well-behaved MCP server for the tests, built on the ``mcp`` SDK's
``MCPServer`` (FastMCP until mcp 2), serving both transports from one
process: Streamable HTTP at ``/mcp`` and the older HTTP+SSE at ``/sse``
(messages posted to ``/messages/``).

Usage: ``python -m tests.tools.servers.mcp_server PORT [CERTFILE KEYFILE]``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent, TextContent, ToolAnnotations
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)

server = MCPServer("switchyard-test")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Repeat the text given.")
def echo(text: str) -> str:
    return text


@server.tool(
    description="Look a word up in a small dictionary.",
    annotations=ToolAnnotations(readOnlyHint=True),
)
def lookup(word: str) -> str:
    return {"mcp": "Model Context Protocol"}.get(word, "unknown")


@server.tool(description="Search a small index: its results as JSON.")
def search(query: str) -> str:
    slug = "-".join(query.lower().split())
    return json.dumps(
        [
            {
                "title": f"Docs on {query}",
                "url": f"https://docs.example.io/{slug}",
                "snippet": f"Reference for {query}.",
            },
            {
                "title": f"Forum: {query}",
                "url": f"https://forum.example.io/{slug}",
                "snippet": "A thread.",
            },
        ]
    )


@server.tool(description="Always fails, as a tool error.")
def fail(reason: str) -> str:
    raise ToolError(f"failed on purpose: {reason}")


@server.tool(description="Sleep, then answer.")
async def sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "awake"


def _headers(ctx: Context) -> dict[str, str]:
    return dict(getattr(ctx.request_context.request, "headers", {}))


@server.tool(description="A digest of the Authorization header this call arrived with.")
def whoami(ctx: Context) -> str:
    headers = _headers(ctx)
    digest = hashlib.sha256(headers.get("authorization", "").encode()).hexdigest()
    return f"authorization-sha256={digest};tenant={headers.get('x-tenant', '')}"


@server.tool(description="The Authorization header itself, as a careless server would.")
def reveal(ctx: Context) -> str:
    return f"you sent {_headers(ctx).get('authorization', '')}"


@server.tool(description="A text of the given length.")
def big(size: int) -> str:
    return "x" * size


@server.tool(description="A picture and a caption.")
def picture() -> list[TextContent | ImageContent]:
    image = ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    return [TextContent(text="a dot"), image]


async def health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


# What the MCP endpoints were asked, for the tests of session reuse: the
# HTTP requests, the TCP connections they came on (a client's address and
# port), the ``initialize`` requests and the sessions closed (``DELETE``).
STATS = {"requests": 0, "initialize": 0, "deleted": 0}
PEERS: set[tuple[str, int]] = set()


async def stats(request: Request) -> JSONResponse:
    return JSONResponse({**STATS, "connections": len(PEERS)})


class Counting:
    """An ASGI layer that counts what reaches the MCP endpoints."""

    def __init__(self, inner: Starlette) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(("/mcp", "/sse", "/messages")):
            return await self.inner(scope, receive, send)
        STATS["requests"] += 1
        if scope.get("client"):
            PEERS.add(tuple(scope["client"]))
        if scope["method"] == "DELETE":
            STATS["deleted"] += 1
        if scope["method"] != "POST":
            return await self.inner(scope, receive, send)
        # The body is read whole (a test's requests are small) and handed on.
        messages, more = [], True
        while more:
            message = await receive()
            messages.append(message)
            more = message.get("more_body", False) and message["type"] == "http.request"
        body = b"".join(m.get("body", b"") for m in messages)
        try:
            sent = json.loads(body)
        except ValueError:
            sent = None
        batch = sent if isinstance(sent, list) else [sent]
        STATS["initialize"] += sum(
            1 for m in batch if isinstance(m, dict) and m.get("method") == "initialize"
        )

        async def replay():
            return messages.pop(0) if messages else await receive()

        return await self.inner(scope, replay, send)


def app() -> Counting:
    streamable = server.streamable_http_app()
    sse = server.sse_app()
    return Counting(
        Starlette(
            routes=[
                Route("/health", health),
                Route("/stats", stats),
                *streamable.routes,
                *sse.routes,
            ],
            lifespan=streamable.router.lifespan_context,
        )
    )


if __name__ == "__main__":
    # PORT [CERTFILE KEYFILE]: with a certificate, over TLS.
    port, *tls = sys.argv[1:]
    certificate = {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]} if tls else {}
    uvicorn.run(app(), host="127.0.0.1", port=int(port), log_level="warning", **certificate)
