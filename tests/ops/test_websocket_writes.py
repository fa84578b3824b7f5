"""The ``websocket_writes`` server patch (config/websocket_writes.py) in a
served process: on, a WebSocket client that stops reading is held to what an
HTTP client is held to (its response waits, then it is dropped: a 499); off
(``SWITCHYARD_SERVER_PATCHES=-websocket_writes``), daphne's sockets take
autobahn's stock path, which serves a turn as before but holds a whole
response for a client that reads none of it."""

from __future__ import annotations

import json
import socket

import pytest
from websockets.sync.client import connect

from config import patches
from tests.conftest import server_env, start_daphne, wait_rows

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def answer_unread(server, key: str, tokens: int):
    """A response.create from a client that then reads nothing."""
    raw = socket.create_connection(("127.0.0.1", server.port))
    # A small receive window: the kernel holds little of what is sent.
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client = connect(
        server.url.replace("http://", "ws://") + "/v1/responses",
        sock=raw,
        additional_headers={"Authorization": f"Bearer {key}"},
        max_queue=1,
        compression=None,
    )
    client.send(
        json.dumps(
            {"type": "response.create", "model": "sim-model", "input": f"[[tokens:{tokens}]]"}
        )
    )
    return client


@pytest.mark.parametrize("spec", ["all", "-websocket_writes"])
def test_a_client_that_reads_nothing_is_dropped_only_under_the_patch(provision, simulator, spec):
    acme = provision("acme", simulator.url)
    server = start_daphne(
        server_env(SWITCHYARD_CLIENT_STALL_SECONDS="2", SWITCHYARD_SERVER_PATCHES=spec)
    )
    try:
        applied = [n for n in patches.NAMES if spec == "all" or n != "websocket_writes"]
        log = server.output()
        assert f"Server patches: {', '.join(applied)}" in log
        assert "not applied" not in log
        client = answer_unread(server, acme.key, 60000)
        try:
            (row,) = wait_rows(1, timeout=60, organisation=acme.organisation)
        finally:
            client.close_socket()
        assert row.method == "WS"
        if spec == "all":
            assert row.status == 499 and row.output_tokens < 60000
        else:
            # autobahn's own writes: the whole response is held for the client.
            assert row.status == 200 and row.output_tokens == 60000
    finally:
        server.stop()
