"""A WebSocket turn during a Redis outage (docs/api/websocket.md): the
same 503 ``unavailable`` error an HTTP request gets, as an error frame; the
socket stays open, and its next turn is served once Redis is back.

The outage is real: the web process reaches its own Redis server through a
TCP proxy that the test cuts and restores (``tests.ops.outages``)."""

from __future__ import annotations

import json

import pytest
from websockets.sync.client import connect

from tests.conftest import server_env, start_daphne, wait_rows
from tests.ops.outages import PASSWORD, TcpProxy, redis_server

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

TERMINAL = {"response.completed", "response.incomplete", "response.failed", "error"}


def turn(socket, text: str) -> dict:
    """The terminal event of one response.create."""
    socket.send(json.dumps({"type": "response.create", "model": "sim-model", "input": text}))
    while (event := json.loads(socket.recv(timeout=30)))["type"] not in TERMINAL:
        pass
    return event


def test_a_turn_during_a_redis_outage_is_a_503_error_frame(provision, simulator, tmp_path):
    acme = provision("acme", simulator.url)
    with redis_server(tmp_path) as redis:
        proxy = TcpProxy(("127.0.0.1", redis.port))
        url = f"redis://:{PASSWORD}@127.0.0.1:{proxy.port}/0"
        server = start_daphne(server_env(REDIS_URL=url))
        try:
            with connect(
                server.url.replace("http://", "ws://") + "/v1/responses",
                additional_headers={"Authorization": f"Bearer {acme.key}"},
            ) as socket:
                assert turn(socket, "hello")["type"] == "response.completed"
                proxy.cut()
                refused = turn(socket, "hello again")
                assert refused["type"] == "error" and refused["status"] == 503, refused
                assert refused["error"]["code"] == "unavailable", refused
                proxy.restore()
                assert turn(socket, "hello at last")["type"] == "response.completed"
            rows = wait_rows(3, organisation=acme.organisation)
            assert sorted(row.status for row in rows) == [200, 200, 503]
        finally:
            server.stop()
            proxy.close()
