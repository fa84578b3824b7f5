"""A web server of pages for the tests of ``open_page`` and ``find_in_page``,
on plain asyncio HTTP/1.1 so that it can also misbehave:

- ``/article``: an HTML page (a title, a script and a style the model must
  not read, a paragraph naming Gustave Eiffel twice);
- ``/notes.txt``: plain text; ``/data.json``: JSON;
- ``/long``: 100 KB of text, numbered lines;
- ``/huge``: 8 MB of HTML;
- ``/slow``: never answers (the connection stays open);
- ``/bomb``: 10 KB of gzip that is 10 MB of text;
- ``/image``: a PNG;
- ``/missing``: a 404;
- ``/redirect?to=URL``: a 302 to URL; ``/loop``: a 302 to itself;
- ``/stats``: the paths asked, in order.

Usage: ``python -m tests.tools.servers.pages PORT``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from urllib.parse import parse_qs, urlsplit

seen: list[str] = []

ARTICLE = b"""<!doctype html>
<html><head><title>The Eiffel Tower</title>
<style>body { color: red }</style>
<script>var secret = "script-text-9931";</script></head>
<body><h1>The Eiffel Tower</h1>
<p>Designed by the engineers of Gustave Eiffel's company, it opened in 1889 for the
World's Fair.</p>
<p>It is 330 metres tall. Parisians first disliked it; GUSTAVE EIFFEL defended it.</p>
</body></html>"""
BOMB = gzip.compress(b" " * (10 * 1024 * 1024))


async def respond(
    writer: asyncio.StreamWriter, status: int, body: bytes, kind: str, extra: str = ""
) -> None:
    head = (
        f"HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        line = (await reader.readline()).decode("latin-1")
        _, target, _ = line.split(" ", 2)
        while (await reader.readline()).strip():
            pass
        await serve(target, writer)
    except (ValueError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(target: str, writer: asyncio.StreamWriter) -> None:
    parts = urlsplit(target)
    path = parts.path
    if path != "/stats":
        seen.append(path)
    html = "text/html; charset=utf-8"
    if path == "/stats":
        await respond(writer, 200, json.dumps(seen).encode(), "application/json")
    elif path == "/health":
        await respond(writer, 200, b"{}", "application/json")
    elif path == "/article":
        await respond(writer, 200, ARTICLE, html)
    elif path == "/notes.txt":
        await respond(writer, 200, b"Plain notes: the lift was added in 1899.", "text/plain")
    elif path == "/data.json":
        await respond(writer, 200, b'{"height_m": 330, "opened": 1889}', "application/json")
    elif path == "/long":
        lines = "".join(f"line {n:05d} of the long page\n" for n in range(4000))
        await respond(writer, 200, lines.encode(), "text/plain; charset=utf-8")
    elif path == "/huge":
        await respond(writer, 200, b"<p>" + b"x" * (8 * 1024 * 1024) + b"</p>", html)
    elif path == "/slow":
        await asyncio.sleep(3600)
    elif path == "/bomb":
        await respond(writer, 200, BOMB, html, "content-encoding: gzip\r\n")
    elif path == "/image":
        await respond(writer, 200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
    elif path == "/redirect":
        to = parse_qs(parts.query).get("to", ["/article"])[0]
        await respond(writer, 302, b"", "text/plain", f"location: {to}\r\n")
    elif path == "/loop":
        await respond(writer, 302, b"", "text/plain", "location: /loop\r\n")
    else:
        await respond(writer, 404, b"<p>not found</p>", html)


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
