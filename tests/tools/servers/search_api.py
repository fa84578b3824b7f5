"""A fake search provider for the tests: SearXNG's JSON API
(``GET /search?q=…&format=json``), Brave Search's
(``GET /res/v1/web/search``, key in ``X-Subscription-Token``) and Tavily's
(``POST /search``, key as a bearer token), on plain asyncio HTTP/1.1 so that
it can also misbehave.

Results are made from the query: three pages on example domains whose
titles and snippets name it. A query holding one of these words misbehaves:

- ``hang``: never answers (the connection stays open);
- ``huge``: a valid answer of 8 MB;
- ``garbage``: ``200 application/json`` that is no JSON;
- ``shapeless``: JSON without results;
- ``drop``: the headers and half of the body, then the connection closes;
- ``gzip``: a compressed answer;
- ``failing``: a 500.

A query that is a URL on 127.0.0.1 (a page of ``tests.tools.servers.pages``)
is the first result's URL.

Brave answers 401 without the key ``BRAVE_KEY``, Tavily without
``TAVILY_KEY``. ``GET /stats`` lists the requests seen (path, query, whether
a key came). Usage: ``python -m tests.tools.servers.search_api PORT``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import zlib
from urllib.parse import parse_qs, urlsplit

BRAVE_KEY = "brave-secret-key-0451"
TAVILY_KEY = "tvly-secret-key-9982"
seen: list[dict[str, object]] = []


def results_for(query: str) -> list[dict[str, str]]:
    slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-")[:60] or "nothing"
    rows = _example_results(query, slug)
    if query.startswith("http://127.0.0.1:"):  # a page of the tests' page server
        rows[0] = {**rows[0], "url": query}
    return rows


def _example_results(query: str, slug: str) -> list[dict[str, str]]:
    return [
        {
            "title": f"{query} - Encyclopedia",
            "url": f"https://en.example.org/wiki/{slug}",
            "snippet": f"An article about {query}, with its history.",
        },
        {
            "title": f"News on {query}",
            "url": f"https://news.example.com/{slug}",
            "snippet": f"The latest <strong>{query}</strong> news.",
        },
        {
            "title": f"A blog on {query}",
            "url": f"https://blog.example.net/{slug}",
            "snippet": f"What I learnt about {query}.",
        },
    ]


def answer(kind: str, query: str) -> dict[str, object]:
    rows = results_for(query)
    if kind == "brave":
        web = [{"title": r["title"], "url": r["url"], "description": r["snippet"]} for r in rows]
        return {"type": "search", "query": {"original": query}, "web": {"results": web}}
    return {
        "query": query,
        "results": [{"title": r["title"], "url": r["url"], "content": r["snippet"]} for r in rows],
    }


async def respond(writer: asyncio.StreamWriter, status: int, body: bytes, extra: str = "") -> None:
    head = (
        f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        line = (await reader.readline()).decode("latin-1")
        method, target, _ = line.split(" ", 2)
        headers: dict[str, str] = {}
        while (header := (await reader.readline()).decode("latin-1").strip()) != "":
            name, _, value = header.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        await serve(method, target, headers, body, writer)
    except (ValueError, ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve(method, target, headers, body, writer) -> None:  # noqa: ANN001
    parts = urlsplit(target)
    params = {k: v[0] for k, v in parse_qs(parts.query).items()}
    if parts.path == "/stats":
        await respond(writer, 200, json.dumps(seen).encode())
        return
    if parts.path == "/health":
        await respond(writer, 200, b"{}")
        return
    if parts.path == "/res/v1/web/search":
        kind, query = "brave", params.get("q", "")
        authorised = headers.get("x-subscription-token") == BRAVE_KEY
    elif parts.path == "/search" and method == "POST":
        kind, query = "tavily", json.loads(body or b"{}").get("query", "")
        authorised = headers.get("authorization") == f"Bearer {TAVILY_KEY}"
    elif parts.path == "/search":
        kind, query, authorised = "searxng", params.get("q", ""), params.get("format") == "json"
    else:
        await respond(writer, 404, b'{"error": "not found"}')
        return
    seen.append({"kind": kind, "query": query, "params": params, "keyed": authorised})
    if not authorised:
        await respond(writer, 401, b'{"error": "unauthorized"}')
    elif "hang" in query:
        await asyncio.sleep(3600)
    elif "huge" in query:
        filler = "x" * 1000
        rows = [{"title": filler, "url": "https://e.example/", "content": filler}] * 8000
        await respond(writer, 200, json.dumps({"results": rows}).encode())
    elif "garbage" in query:
        await respond(writer, 200, b"<html>not json{")
    elif "shapeless" in query:
        await respond(writer, 200, b'{"hello": "world"}')
    elif "drop" in query:
        data = json.dumps(answer(kind, query)).encode()
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n".encode()
            + data[: len(data) // 2]
        )
        await writer.drain()
        writer.transport.abort()
    elif "gzip" in query:
        data = zlib.compress(json.dumps(answer(kind, query)).encode())
        await respond(writer, 200, data, "content-encoding: deflate\r\n")
    elif "failing" in query:
        await respond(writer, 500, b'{"error": "internal"}')
    else:
        await respond(writer, 200, json.dumps(answer(kind, query)).encode())


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
