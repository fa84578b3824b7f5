"""The backend client against real sockets that misbehave in known ways:
each failure must surface as the client's own error class that failover and
the relay tell apart."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest
from django.test import override_settings

from responses_api.backends.client import (
    BackendDisconnected,
    BackendTimeout,
    BackendUnreachable,
    Upstream,
)
from responses_api.backends.health import probe

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def _request_head(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return head.lower()


def _run(
    handler: Handler,
    exchange: Callable[[Upstream], Awaitable[object]],
    host: str = "127.0.0.1",
) -> object:
    async def main() -> object:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        upstream = Upstream(f"http://{host}:{port}/v1", "sk-backend")
        try:
            return await exchange(upstream)
        finally:
            await upstream.aclose()
            server.close()

    return asyncio.run(main())


async def _read_all(upstream: Upstream) -> bytes:
    answer = await upstream.send_chat(BODY)
    try:
        return b"".join([chunk async for chunk in answer.chunks()])
    finally:
        answer.close()


def test_a_refused_connection_is_unreachable():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main() -> None:
        upstream = Upstream(f"http://127.0.0.1:{port}/v1", "")
        try:
            await upstream.send_chat(BODY)
        finally:
            await upstream.aclose()

    with pytest.raises(BackendUnreachable):
        asyncio.run(main())


def test_a_connection_closed_without_an_answer_is_a_disconnect():
    async def handler(reader, writer) -> None:
        await _request_head(reader)
        writer.close()

    with pytest.raises(BackendDisconnected):
        _run(handler, _read_all)


def test_a_malformed_status_line_is_a_disconnect():
    async def handler(reader, writer) -> None:
        await _request_head(reader)
        writer.write(b"HTTP/1.1 OK-ish\r\n\r\n")
        await writer.drain()
        writer.close()

    with pytest.raises(BackendDisconnected):
        _run(handler, _read_all)


def test_a_body_cut_mid_chunk_is_a_disconnect_after_what_arrived():
    got: list[bytes] = []

    async def handler(reader, writer) -> None:
        await _request_head(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n20\r\npartial"
        )
        await writer.drain()
        writer.close()

    async def exchange(upstream: Upstream) -> None:
        answer = await upstream.send_chat(BODY)
        try:
            async for chunk in answer.chunks():
                got.append(chunk)
        finally:
            answer.close()

    with pytest.raises(BackendDisconnected):
        _run(handler, exchange)
    assert b"".join(got).startswith(b"data: ")


@override_settings(SWITCHYARD_READ_TIMEOUT=0.3)
def test_a_silent_backend_is_a_timeout():
    async def handler(reader, writer) -> None:
        await _request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(5)  # the scenario: silent for longer than the read timeout

    with pytest.raises(BackendTimeout):
        _run(handler, _read_all)


def test_requests_ask_for_identity_and_carry_no_cookie_from_an_earlier_answer():
    heads: list[bytes] = []

    async def handler(reader, writer) -> None:
        while not reader.at_eof():
            try:
                heads.append(await _request_head(reader))
            except asyncio.IncompleteReadError:
                break
            body = b"data: [DONE]\n\n"
            writer.write(
                b"HTTP/1.1 200 OK\r\nset-cookie: session=org-a; Path=/\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()

    async def exchange(upstream: Upstream) -> list[bytes]:
        return [await _read_all(upstream), await _read_all(upstream)]

    # By name: cookie jars ignore cookies from bare IP addresses.
    assert _run(handler, exchange, host="localhost") == [b"data: [DONE]\n\n"] * 2
    assert len(heads) == 2
    for head in heads:
        assert b"accept-encoding: identity" in head
        assert b"authorization: bearer sk-backend" in head
        assert b"cookie" not in head


def test_health_probes_and_chat_calls_ignore_environment_proxies(monkeypatch):
    """Both kinds of backend call are made alike: a proxy named in the
    environment (nothing listens there) is not used by either."""
    heads: list[bytes] = []

    async def handler(reader, writer) -> None:
        heads.append(await _request_head(reader))
        body = b'{"object": "list", "data": [{"id": "m1"}]}'
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{dead}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    async def main() -> object:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            return await asyncio.to_thread(probe, f"http://127.0.0.1:{port}/v1", "sk-backend")
        finally:
            server.close()

    result = asyncio.run(main())
    assert result.ok, result.error
    assert result.models == ["m1"]
    assert heads and b"authorization: bearer sk-backend" in heads[0]
    assert b"get /v1/models" in heads[0]


def test_a_connection_closed_before_its_answer_is_tried_once_more_on_a_new_one():
    """What a kept-alive connection the backend closed as it was reused
    looks like: the request is sent again on a new connection."""
    connections: list[int] = []

    async def handler(reader, writer) -> None:
        connections.append(len(connections))
        await _request_head(reader)
        if len(connections) == 1:
            writer.close()  # the first connection closes without an answer
            return
        body = b"data: [DONE]\n\n"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()

    assert _run(handler, _read_all) == b"data: [DONE]\n\n"
    assert len(connections) == 2
