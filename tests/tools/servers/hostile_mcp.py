"""A hostile MCP server for the tests: plain asyncio HTTP/1.1, no framework,
so it can do what no well-behaved server library would.

It speaks enough Streamable HTTP to get through the handshake (``initialize``
and ``notifications/initialized`` are answered correctly; the optional GET
stream and the closing DELETE are refused with 405), then answers
every other request (``tools/list``, ``tools/call``) as the path's first
segment says:

- ``hang``: never answers (the connection stays open);
- ``hang-accept``: from the first request on, reads nothing, answers nothing;
- ``huge``: a valid result whose text is 50 MB, as one JSON body;
- ``huge-sse``: the same as one Server-Sent Event;
- ``gzip-bomb``: the same in 50 KB of gzip (``content-encoding: gzip``);
- ``garbage``: ``200 application/json`` that is no JSON;
- ``garbage-secret``: the same, repeating the request's Authorization header;
- ``not-jsonrpc``: JSON that is no JSON-RPC message;
- ``drop``: the headers and half of the body, then the connection closes;
- ``drop-sse``: an event stream's headers and half an event, then closes;
- ``html-500``: a 500 with an HTML page;
- ``unauthorized``: 401 for every request, the handshake too;
- ``echo-secret``: a JSON-RPC error whose message repeats the request's
  Authorization header;
- ``rpc-error``: a JSON-RPC error of its own (invalid params, -32602).
- ``rpc-error-huge``: a JSON-RPC error whose code is far past 64 bits.

``call-<behaviour>`` lists one tool (``add``) correctly and does
``<behaviour>`` to its calls: a tool loop gets as far as calling it.

``GET /stats`` answers how many bytes of body each behaviour wrote before
its connection closed. Usage: ``python -m tests.tools.servers.hostile_mcp PORT``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import zlib
from collections import Counter
from functools import cache

ADD = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}},
}
HUGE = 50 * 1024 * 1024
CHUNK = 64 * 1024
written: Counter[str] = Counter()

INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {"listChanged": False}},
    "serverInfo": {"name": "hostile", "version": "1"},
}


def _head(status: str, content_type: str, length: int | None = None, *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"content-type: {content_type}", *extra]
    lines.append(f"content-length: {length}" if length is not None else "connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _json(status: str, body: object) -> bytes:
    data = json.dumps(body).encode()
    return _head(status, "application/json", len(data)) + data


async def _huge(writer: asyncio.StreamWriter, request_id: object, *, sse: bool) -> None:
    """A 50 MB answer written as the client reads it; never built whole."""
    start = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1]
    prefix = (start + ', "result": {"content": [{"type": "text", "text": "').encode()
    suffix = b'"}]}}'
    if sse:
        prefix, suffix = b"event: message\ndata: " + prefix, suffix + b"\n\n"
        writer.write(_head("200 OK", "text/event-stream"))
    else:
        writer.write(_head("200 OK", "application/json", len(prefix) + HUGE + len(suffix)))
    writer.write(prefix)
    chunk = b"x" * CHUNK
    for _ in range(HUGE // CHUNK):
        writer.write(chunk)
        await writer.drain()
        written["huge-sse" if sse else "huge"] += CHUNK
    writer.write(suffix)
    await writer.drain()


@cache
def _gzip_bomb() -> bytes:
    """A valid result of 50 MB of text in about 50 KB of gzip."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [compressor.compress(b'{"jsonrpc": "2.0", "id": 1, "result": {"content": [')]
    parts.append(compressor.compress(b'{"type": "text", "text": "'))
    chunk = b"x" * CHUNK
    parts += [compressor.compress(chunk) for _ in range(HUGE // CHUNK)]
    parts.append(compressor.compress(b'"}]}}'))
    return b"".join([*parts, compressor.flush()])


async def _misbehave(behaviour: str, writer: asyncio.StreamWriter, message: dict, headers) -> bool:
    """Answer a request past the handshake; False: close the connection."""
    request_id = message.get("id")
    if behaviour == "hang":
        await asyncio.sleep(3600)
    elif behaviour in ("huge", "huge-sse"):
        await _huge(writer, request_id, sse=behaviour == "huge-sse")
        return False
    elif behaviour == "gzip-bomb":
        bomb = _gzip_bomb()
        head = _head("200 OK", "application/json", len(bomb), "content-encoding: gzip")
        writer.write(head + bomb)
    elif behaviour == "garbage":
        writer.write(_head("200 OK", "application/json", 14) + b"<<not json!>>\n")
    elif behaviour == "garbage-secret":
        page = f"<<{headers.get('authorization', '')}>>".encode()
        writer.write(_head("200 OK", "application/json", len(page)) + page)
    elif behaviour == "not-jsonrpc":
        writer.write(_json("200 OK", {"hello": "world", "id": request_id}))
    elif behaviour == "drop":
        writer.write(_head("200 OK", "application/json", 1000) + b'{"jsonrpc": "2.0", "id"')
        await writer.drain()
        return False
    elif behaviour == "drop-sse":
        writer.write(_head("200 OK", "text/event-stream") + b'event: message\ndata: {"json')
        await writer.drain()
        return False
    elif behaviour == "html-500":
        page = b"<html><body><h1>Internal Server Error</h1></body></html>"
        writer.write(_head("500 Internal Server Error", "text/html", len(page)) + page)
    elif behaviour == "rpc-error":
        error = {"code": -32602, "message": "no such city: Atlantis"}
        writer.write(_json("200 OK", {"jsonrpc": "2.0", "id": request_id, "error": error}))
    elif behaviour == "rpc-error-huge":
        error = {"code": 10**30, "message": "a code past any integer type"}
        writer.write(_json("200 OK", {"jsonrpc": "2.0", "id": request_id, "error": error}))
    elif behaviour == "echo-secret":
        said = f"bad credentials: {headers.get('authorization', '')}"
        error = {"code": -32001, "message": said}
        writer.write(_json("200 OK", {"jsonrpc": "2.0", "id": request_id, "error": error}))
    return True


async def _read_request(reader: asyncio.StreamReader):
    line = await reader.readline()
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, target, headers, body


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while request := await _read_request(reader):
            method, target, headers, body = request
            behaviour = target.strip("/").split("/")[0].split("?")[0]
            if behaviour == "hang-accept":
                await asyncio.sleep(3600)
            if method == "GET" and behaviour == "stats":
                writer.write(_json("200 OK", dict(written)))
            elif behaviour == "unauthorized":
                writer.write(_head("401 Unauthorized", "text/plain", 6) + b"go away")
            elif method != "POST":
                writer.write(_head("405 Method Not Allowed", "text/plain", 0))
            else:
                message = json.loads(body)
                if message.get("method") == "initialize":
                    # A session id: the client then opens the optional GET
                    # stream too, which is refused (405) as servers may.
                    answer = json.dumps(
                        {"jsonrpc": "2.0", "id": message["id"], "result": INITIALIZE}
                    ).encode()
                    session = "mcp-session-id: hostile-session"
                    writer.write(_head("200 OK", "application/json", len(answer), session))
                    writer.write(answer)
                elif "id" not in message:
                    writer.write(_head("202 Accepted", "text/plain", 0))
                elif behaviour.startswith("call-") and message.get("method") == "tools/list":
                    listing = {"tools": [ADD]}
                    writer.write(
                        _json("200 OK", {"jsonrpc": "2.0", "id": message["id"], "result": listing})
                    )
                elif not await _misbehave(
                    behaviour.removeprefix("call-"), writer, message, headers
                ):
                    break
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
