"""The project's ASGI application served in the test's own process.

A request goes through ``config.asgi.application`` as daphne would hand it
over, but without a socket or a server process: ``httpx.ASGITransport``
drives it, in an event loop of its own that ``async_to_sync`` runs while
the test's thread waits. The application's database work (``sync_to_async``,
thread-sensitive) then runs on the test's thread, in the test's transaction,
so a test that reads and writes only through the application needs no
``transaction=True``. What the application writes from the event loop or its
own worker thread (stored responses) is on other connections: such tests keep
``transaction=True``.

The backend is the simulator, a real HTTP server on a port of loopback,
served by uvicorn on a thread for the whole test run.

Usage rows are handed to a sink that writes them on the test's thread once
the request has ended (``write_rows``, the writer's own insert), instead of
the Redis stream a server process drains: a request's row is in the
database when its answer is back, and no writer task outlives a request's
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from openai import OpenAI

BASE_URL = "http://testserver"


@functools.cache
def application() -> Any:
    """``config.asgi.application``, imported without the process-wide
    collector settings it makes for a long-lived server (``gc.freeze`` and
    its thresholds), which would change the collector of the test run."""
    thresholds = gc.get_threshold()
    from config import asgi

    gc.unfreeze()
    gc.set_threshold(*thresholds)
    return asgi.application


class Rows:
    """The usage sink while a test serves in-process: rows are kept until the
    request's loop has ended, then written on the test's thread. What a
    request gives back with its row (leases, spend counters: ``then`` and
    ``scripts``) still goes to Redis in the request's loop, as with the
    stream."""

    def __init__(self) -> None:
        self.pending: list[dict[str, Any]] = []

    def submit(
        self, row: dict[str, Any], scripts: Sequence[Any] = (), then: Sequence[Any] = ()
    ) -> Any:
        from django.conf import settings

        from responses_api.runtime import redis_conn

        self.pending.append(row)
        if settings.REDIS_URL and (scripts or then):
            return redis_conn.run_batch(then, scripts)
        return None

    def write(self) -> None:
        from responses_api.usage.writer import write_rows

        rows, self.pending = self.pending, []
        if rows:
            write_rows(rows)


async def _close_loop_resources() -> None:
    """What the application keeps per event loop, closed before the loop
    ends: its backend connections, its Redis client and the stored
    responses' connection."""
    from responses_api.backends.client import close_clients
    from responses_api.runtime import redis_conn
    from responses_api.store import loop as store_loop

    await close_clients()
    client = redis_conn._clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()
    store_loop.close()


class InProcessTransport(httpx.BaseTransport):
    """A synchronous httpx transport answering each request from the ASGI
    application, in a new event loop per request."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        content = request.read()

        async def call() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            transport = httpx.ASGITransport(app=application(), client=("127.0.0.1", 5000))
            forwarded = httpx.Request(
                request.method, request.url, headers=request.headers, content=content
            )
            try:
                response = await transport.handle_async_request(forwarded)
                body = await response.aread()
            finally:
                await _close_loop_resources()
            return response.status_code, response.headers.raw, body

        status, headers, body = async_to_sync(call)()
        self.rows.write()
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))


class Gateway:
    """Clients of the in-process application: plain httpx and the OpenAI SDK."""

    url = BASE_URL

    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self.transport = InProcessTransport(rows)
        self.http = httpx.Client(transport=self.transport, base_url=BASE_URL, timeout=60)

    def openai(self, key: str, *, prefix: str = "/v1") -> OpenAI:
        http = httpx.Client(transport=self.transport, timeout=60)
        return OpenAI(base_url=BASE_URL + prefix, api_key=key, max_retries=0, http_client=http)


@contextlib.contextmanager
def serving() -> Iterator[Gateway]:
    """The application, ready for a test: the usage sink replaced, the
    catalogue cache empty (an earlier test's organisation may have had the
    same id), and Django's per-request connection handling off, as Django's
    own test client has it (it would close the test's connection
    mid-transaction)."""
    from responses_api.catalogue import catalog
    from responses_api.pipeline import exchange

    application()  # Django's set-up, logging included, done before the test's own
    rows = Rows()
    saved = exchange.sink
    exchange.sink = rows  # type: ignore[assignment]
    catalog.forget()
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    gateway = Gateway(rows)
    try:
        yield gateway
    finally:
        gateway.http.close()
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
        exchange.sink = saved
        catalog.forget()


class SimulatorThread:
    """The simulator backend, served by uvicorn on a thread of this process."""

    def __init__(self) -> None:
        import uvicorn

        from responses_api.simulator.server import Simulator

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        config = uvicorn.Config(
            Simulator(models=["sim-model"]),
            log_config=None,  # the test run's logging stays as it is
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )
        self.thread.start()
        from tests.support import wait_until

        wait_until(lambda: self.server.started, timeout=10, message="simulator did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@functools.cache
def simulator() -> SimulatorThread:
    """One simulator for the whole run, as the session's simulator process is."""
    import atexit

    sim = SimulatorThread()
    atexit.register(sim.stop)
    return sim
