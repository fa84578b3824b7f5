"""Clients that would hold a web process's memory or event loop, against a
web process as deployed (``python -m config.serve``): a client that stops
reading a long stream, a request head sent a byte at a time, a body of
thousands of gzip members. Each is bounded or ended while the process
keeps serving everyone else.

The request whose ``Content-Length`` is over the cap is refused before its
body in ``test_body_limits.py``; reason phrases are in ``test_hardening.py``.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from aiohttp import web

from tests.conftest import server_env, start_daphne, wait_rows
from tests.support import healthz_watch

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

STALL_SECONDS = 3
HEADER_SECONDS = 1


class Firehose:
    """A Chat Completions backend that streams ``limit`` bytes of content
    deltas of ``piece`` characters as fast as its client reads them, in a
    thread of its own. Small pieces make a long stream of events out of
    little text: the answer's text is held to the request's output cap, the
    events' number is not."""

    def __init__(self, limit: int, piece: int = 8192) -> None:
        self.limit = limit
        self.piece = piece
        self.sent = 0
        self.aborted = threading.Event()
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        started.set()
        self.loop.run_forever()

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "sim-model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "sim-model",
            "choices": [
                {"index": 0, "delta": {"content": "x" * self.piece}, "finish_reason": None}
            ],
        }
        line = b"data: " + orjson.dumps(chunk) + b"\n\n"
        chunk["choices"][0].update(delta={}, finish_reason="stop")  # type: ignore[index]
        try:
            while self.sent < self.limit:
                await response.write(line)
                self.sent += len(line)
            await response.write(b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n")
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            self.aborted.set()
            raise
        return response

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def web_process(django_db_setup, django_db_blocker) -> Iterator:
    server = start_daphne(
        server_env(
            SWITCHYARD_CLIENT_STALL_SECONDS=str(STALL_SECONDS),
            SWITCHYARD_HEADER_TIMEOUT_SECONDS=str(HEADER_SECONDS),
        )
    )
    yield server
    server.stop()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def stream_request(key: str) -> bytes:
    body = orjson.dumps({"model": "sim-model", "input": "go", "stream": True})
    return (
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (key.encode(), len(body), body)
    )


def non_reader(port: int) -> socket.socket:
    """A client socket that will hold little: the server's writes fill it at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


def read_until_closed(sock: socket.socket, timeout: float) -> int:
    sock.settimeout(timeout)
    total = 0
    try:
        while data := sock.recv(1 << 20):
            total += len(data)
    except ConnectionResetError:
        pass
    return total


def test_a_client_that_stops_reading_holds_no_memory_and_ends_as_a_499(web_process, provision):
    """Without backpressure, the process buffered the whole stream
    (300 MiB: RSS from 241 to 2,705 MB). Paused past the stall deadline,
    the connection is closed and the request is a client gone."""
    firehose = Firehose(limit=300 * 1024 * 1024, piece=16)
    try:
        tenant = provision("acme", firehose.url)
        before = rss_mb(web_process.process.pid)
        sock = non_reader(web_process.port)
        sock.sendall(stream_request(tenant.key))
        started = time.monotonic()
        peak = before
        while time.monotonic() - started < STALL_SECONDS - 0.5:
            peak = max(peak, rss_mb(web_process.process.pid))
            time.sleep(0.1)  # the sampling rate of the RSS over the stall
        assert peak - before < 40, f"RSS grew by {peak - before:.0f} MB"
        assert firehose.sent < 30 * 1024 * 1024  # the backend was held back too

        # Past the deadline the server closes the connection under the client
        # (reading any earlier would resume the stream).
        (row,) = wait_rows(1, organisation=tenant.organisation)
        assert row.status == 499
        assert STALL_SECONDS <= time.monotonic() - started < STALL_SECONDS + 5
        assert read_until_closed(sock, timeout=5) < 10 * 1024 * 1024
        sock.close()
        assert firehose.aborted.wait(10)  # and the upstream request was aborted
        assert "client stopped reading" in web_process.output()
    finally:
        firehose.stop()


def test_a_client_that_reads_slowly_gets_the_whole_stream(web_process, provision):
    """Reading a little at a time for longer than the stall deadline, while
    the server's writes stay paused, is progress: the stream is not cut."""
    # Many events (more than the sockets' buffers take) of less text than
    # the output cap, so that it completes.
    firehose = Firehose(limit=8 * 1024 * 1024, piece=32)
    try:
        tenant = provision("acme", firehose.url)
        sock = non_reader(web_process.port)
        sock.sendall(stream_request(tenant.key))
        sock.settimeout(30)
        received = bytearray()
        started = time.monotonic()
        while time.monotonic() - started < 2.5 * STALL_SECONDS:
            received += sock.recv(4096)
            time.sleep(0.1)  # the scenario: a client that reads slowly
        assert len(received) < 2 * 1024 * 1024  # it was slow: the server waited
        while not received.endswith(b"0\r\n\r\n"):
            data = sock.recv(1 << 20)
            assert data
            received += data
        sock.close()
        assert b"event: response.completed" in received
        (row,) = wait_rows(1, organisation=tenant.organisation)
        assert row.status == 200
    finally:
        firehose.stop()


def test_a_head_sent_too_slowly_is_closed_while_others_are_served(web_process):
    with healthz_watch(web_process.url):
        half = socket.create_connection(("127.0.0.1", web_process.port))
        half.sendall(b"POST /v1/respo")
        trickle = socket.create_connection(("127.0.0.1", web_process.port))
        started = time.monotonic()
        # A byte every 0.2 s: Twisted's idle timeout would never fire.
        closed = None
        for byte in b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n":
            try:
                trickle.send(bytes([byte]))
            except OSError:
                closed = time.monotonic() - started
                break
            time.sleep(0.2)
        assert closed is not None and closed < HEADER_SECONDS + 1.5
        assert read_until_closed(half, timeout=5) == 0
        assert time.monotonic() - started < HEADER_SECONDS + 3


def test_a_kept_alive_connection_idle_past_the_header_timeout_still_serves(web_process):
    """The deadline of a later request's head counts from its first byte."""
    with httpx.Client(base_url=web_process.url, timeout=10) as client:
        first = client.get("/healthz")
        time.sleep(HEADER_SECONDS + 1)
        second = client.get("/healthz")
    assert first.status_code == second.status_code == 200
    assert first.extensions["network_stream"] is second.extensions["network_stream"]


def test_two_hundred_thousand_gzip_members_are_refused_while_others_are_served(
    web_process, provision, simulator
):
    tenant = provision("acme", simulator.url)
    body = gzip.compress(b" ") * 200_000  # 4.2 MB: 9.7 s of event loop, once
    with healthz_watch(web_process.url):
        started = time.monotonic()
        with httpx.Client(base_url=web_process.url, timeout=30) as client:
            response = client.post(
                "/v1/responses",
                content=body,
                headers={
                    "authorization": f"Bearer {tenant.key}",
                    "content-type": "application/json",
                    "content-encoding": "gzip",
                },
            )
        elapsed = time.monotonic() - started
    assert response.status_code == 400
    assert "more than 64 members" in response.json()["error"]["message"]
    assert elapsed < 1.0
    # A legitimate body of a few members is served.
    content = orjson.dumps({"model": "sim-model", "input": "hello there"})
    legit = gzip.compress(content[:10]) + gzip.compress(content[10:])
    served = httpx.post(
        web_process.url + "/v1/responses",
        content=legit,
        headers={
            "authorization": f"Bearer {tenant.key}",
            "content-type": "application/json",
            "content-encoding": "gzip",
        },
        timeout=30,
    )
    assert served.status_code == 200


def test_without_the_server_patches_a_stream_is_still_served(provision, simulator):
    """SWITCHYARD_SERVER_PATCHES=none: stock daphne and Twisted, without
    backpressure or a header deadline, serve as before."""
    tenant = provision("acme", simulator.url)
    web_stock = start_daphne(server_env(SWITCHYARD_SERVER_PATCHES="none"))
    try:
        with httpx.stream(
            "POST",
            web_stock.url + "/v1/responses",
            headers={"authorization": f"Bearer {tenant.key}"},
            json={"model": "sim-model", "input": "[[tokens:500]] go", "stream": True},
            timeout=30,
        ) as response:
            text = "".join(response.iter_text())
        assert response.status_code == 200
        assert "response.completed" in text
        assert "Server patches: none" in web_stock.output()
    finally:
        web_stock.stop()
