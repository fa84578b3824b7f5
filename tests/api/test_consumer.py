"""The API's ASGI application in-process, at the ASGI boundary (Django's
``tests/asgi`` style): what it reads, what it writes, and the one usage row
it hands over, for disconnects, oversized and slow bodies, strangers and
draining. The backend is the simulator, a real process over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from asgiref.testing import ApplicationCommunicator
from django.test import override_settings

from responses_api.backends.client import close_clients
from responses_api.catalogue import catalog
from responses_api.edge.http import ApiConsumer
from responses_api.pipeline import exchange as exchange_module
from responses_api.pipeline.draining import drain
from responses_api.runtime import redis_conn
from tests.conftest import wait_for
from tests.routing.conftest import sim_stats

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def rows(monkeypatch) -> list[dict[str, Any]]:
    """The rows the application hands to the usage sink, in order."""
    handed: list[dict[str, Any]] = []

    class Sink:
        def submit(self, row: dict[str, Any], scripts=(), then=()):
            handed.append(row)
            # What the request gives back with its row (with Redis) still goes.
            return redis_conn.run_batch(then) if then else None

    monkeypatch.setattr(exchange_module, "sink", Sink())
    return handed


@pytest.fixture
def tenant(provision, simulator):
    return provision("acme", simulator.url)


def scope(key: str | None, *, path: str = "/v1/responses", method: str = "POST", **headers):
    raw = [(b"content-type", b"application/json")]
    if key is not None:
        raw.append((b"authorization", f"Bearer {key}".encode()))
    raw.extend((name.replace("_", "-").encode(), value.encode()) for name, value in headers.items())
    return {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": raw,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


def body(text: str, *, stream: bool = True) -> bytes:
    return orjson.dumps({"model": "sim-model", "input": text, "stream": stream})


class Client:
    """One request to the application, driven message by message."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.app = ApplicationCommunicator(ApiConsumer(), scope)
        self.received = b""
        self.start: dict[str, Any] | None = None

    async def send_body(self, data: bytes, more: bool = False) -> None:
        await self.app.send_input({"type": "http.request", "body": data, "more_body": more})

    async def response_start(self, within: float = 10) -> dict[str, Any]:
        self.start = await self.app.receive_output(within)
        assert self.start["type"] == "http.response.start"
        return self.start

    async def read_until(self, marker: bytes, within: float = 10) -> None:
        if self.start is None:
            await self.response_start(within)
        while marker not in self.received:
            message = await self.app.receive_output(within)
            self.received += message.get("body", b"")
            if not message.get("more_body"):
                break

    async def read_all(self, within: float = 10) -> bytes:
        await self.read_until(b"\0never\0", within)
        return self.received

    def status(self) -> int:
        assert self.start is not None
        return self.start["status"]

    def header(self, name: bytes) -> bytes | None:
        assert self.start is not None
        return dict(self.start["headers"]).get(name)

    def error(self) -> dict[str, Any]:
        return orjson.loads(self.received)["error"]


def run(coroutine) -> Any:
    async def main() -> Any:
        try:
            return await coroutine
        finally:
            await close_clients()  # this loop's backend connections

    return asyncio.run(main())


@pytest.fixture(autouse=True)
def _fresh_catalogue():
    catalog.forget()  # organisations of earlier tests may have had the same ids
    yield
    catalog.forget()


def test_a_disconnect_mid_stream_aborts_upstream_and_hands_one_499_row(tenant, simulator, rows):
    before = sim_stats(simulator)

    async def main() -> None:
        client = Client(scope(tenant.key))
        await client.send_body(body("long [[tokens:400]] [[rate:40]]"))
        await client.read_until(b'"response.output_text.delta"')
        await client.app.send_input({"type": "http.disconnect"})
        await client.app.wait(5)  # the application returns, without an exception

    run(main())
    stats = wait_for(
        lambda: (s := sim_stats(simulator))["disconnects"] > before["disconnects"] and s, timeout=5
    )
    assert stats["disconnects"] == before["disconnects"] + 1
    assert [r["status"] for r in rows] == [499]
    assert rows[0]["note"] == "Client disconnected"
    assert 0 < rows[0]["output_tokens"] < 400


def test_a_disconnect_while_queued_hands_a_499_row_with_its_wait(provision, simulator, rows):
    from responses_api.catalogue.services.backends import backend_ensure

    tenant = provision("acme", simulator.url)
    backend_ensure(
        organisation=tenant.organisation, name="sim", base_url=simulator.url, max_concurrency=1
    )

    async def main() -> None:
        holder = Client(scope(tenant.key))
        await holder.send_body(body("hold [[tokens:200]] [[rate:40]]"))
        await holder.read_until(b'"response.output_text.delta"')
        queued = Client(scope(tenant.key))
        await queued.send_body(body("queued [[tokens:3]]"))
        # What is measured: the request waits this long for the only slot.
        await asyncio.sleep(0.3)
        await queued.app.send_input({"type": "http.disconnect"})
        await queued.app.wait(5)
        await holder.app.send_input({"type": "http.disconnect"})
        await holder.app.wait(5)

    run(main())
    assert [r["status"] for r in rows] == [499, 499]
    queued_row = rows[0]
    assert queued_row["backend_id"] is None or queued_row["output_tokens"] == 0
    assert queued_row["queue_wait_ms"] >= 250


def test_a_disconnect_after_a_complete_response_changes_nothing(tenant, rows):
    async def main() -> bytes:
        client = Client(scope(tenant.key))
        await client.send_body(body("hi [[tokens:5]]", stream=False))
        received = await client.read_all()
        assert client.status() == 200
        # daphne sends this after every complete response.
        await client.app.send_input({"type": "http.disconnect"})
        await client.app.wait(5)
        return received

    answer = orjson.loads(run(main()))
    assert answer["status"] == "completed"
    assert [r["status"] for r in rows] == [200]
    assert rows[0]["output_tokens"] == 5


@override_settings(SWITCHYARD_MAX_BODY_BYTES=1000)
def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read(tenant, rows):
    async def main() -> Client:
        client = Client(scope(tenant.key, content_length="5000"))
        await client.read_all()  # answered without a single http.request message
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 413
    assert client.error()["code"] == "request_too_large"
    assert client.header(b"x-request-id")
    assert [r["status"] for r in rows] == [413]


@override_settings(SWITCHYARD_MAX_BODY_BYTES=1000)
def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_cap(tenant, rows):
    async def main() -> Client:
        client = Client(scope(tenant.key))
        await client.send_body(b"x" * 600, more=True)
        await client.send_body(b"x" * 600, more=True)  # 1,200 bytes: over
        await client.read_all()
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 413
    assert client.error()["code"] == "request_too_large"
    assert [r["status"] for r in rows] == [413]


def test_the_body_of_a_request_without_a_valid_key_is_never_read(tenant, rows):
    async def main() -> Client:
        client = Client(scope("sy_sk_not-a-real-key-0000000000000000"))
        # Nothing is sent: an application that waited for the body would hang.
        await client.read_all(within=5)
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 401
    assert client.error()["code"] == "invalid_api_key"
    assert client.header(b"x-request-id")
    assert rows == []  # a stranger's request is no organisation's row


@override_settings(SWITCHYARD_BODY_TIMEOUT_SECONDS=0.3)
def test_a_body_that_does_not_arrive_in_time_is_a_408(tenant, rows):
    async def main() -> Client:
        client = Client(scope(tenant.key))
        await client.send_body(b'{"model": "sim-', more=True)  # and then nothing
        await client.read_all(within=5)
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 408
    assert client.error()["code"] == "request_timeout"
    assert client.header(b"connection") == b"close"
    assert [r["status"] for r in rows] == [408]


def test_a_draining_process_refuses_new_requests_without_a_row(tenant, rows, monkeypatch):
    monkeypatch.setattr(drain, "draining", True)

    async def main() -> Client:
        client = Client(scope(tenant.key))
        await client.read_all()
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 503
    assert client.error()["code"] == "server_shutting_down"
    assert client.header(b"retry-after") == b"1"
    assert rows == []


def test_an_unknown_route_with_a_valid_key_is_a_404_with_a_row(tenant, rows):
    async def main() -> Client:
        client = Client(scope(tenant.key, path="/v1/nothing-here", method="GET"))
        await client.read_all()
        await client.app.wait(5)
        return client

    client = run(main())
    assert client.status() == 404
    assert client.error()["code"] == "unknown_url"
    assert [(r["status"], r["method"], r["endpoint"]) for r in rows] == [
        (404, "GET", "/nothing-here")
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_a_bug_in_the_ending_still_ends_the_request_with_its_row(tenant, rows, monkeypatch, stream):
    """Whatever raises in the ending (a bug), the request ends: an error if
    nothing was sent, an ``error`` event closing a started stream, and one
    row saying 500; nothing reaches the server."""
    from responses_api.pipeline import ending

    real = ending.end_exchange

    async def broken_ending(call, **kwargs):
        if kwargs.get("error") is None and kwargs.get("reply") is None:
            raise TypeError("sequence item 1: expected str instance, int found")
        await real(call, **kwargs)

    monkeypatch.setattr(ending, "end_exchange", broken_ending)

    async def main() -> Client:
        client = Client(scope(tenant.key))
        await client.send_body(body("hi [[tokens:3]]", stream=stream))
        await client.read_all()
        await client.app.wait(5)  # returns, without an exception
        return client

    client = run(main())
    if stream:
        assert client.status() == 200
        assert client.received.rstrip().splitlines()[-2] == b"event: error"
        assert b'"code":"server_error"' in client.received
        # Numbered after the events before it, as every event of a stream is.
        events = [
            orjson.loads(line[len(b"data: ") :])
            for line in bytes(client.received).splitlines()
            if line.startswith(b"data: {")
        ]
        numbers = [event["sequence_number"] for event in events]
        assert numbers == list(range(len(numbers))) and len(numbers) > 1
        assert events[-1]["type"] == "error"  # OpenAI's error event
    else:
        assert client.status() == 500
        assert client.error()["code"] == "server_error"
    assert [r["status"] for r in rows] == [500]
    assert rows[0]["error_message"].startswith("TypeError: sequence item 1")


def test_a_bug_before_the_exchange_exists_is_a_500_envelope(monkeypatch):
    from responses_api.edge import http as consumers

    def broken(path, method):
        raise RuntimeError("the route table is broken")

    monkeypatch.setattr(consumers.routes, "resolve", broken)

    async def main() -> Client:
        client = Client(scope("sy_sk_whatever"))
        await client.read_all()
        await client.app.wait(5)  # returns, without an exception
        return client

    client = run(main())
    assert client.status() == 500
    assert client.error()["code"] == "server_error"
    assert client.header(b"x-request-id")
